"""CreateTrainingJob and UpdateTrainingJob requests: SageMaker's JSON, parsed and validated whole.

A request is checked completely before anything starts, and every problem is reported at once
(``ConfigErrors``), each with its path in the request (``DebugRuleConfigurations[2].RuleParameters
.threshold``). Fields trainprobe does not act on (RoleArn, VpcConfig, ...) are kept as they came,
so a request written for SageMaker is accepted unchanged and written back unchanged.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trainprobe.config.errors import ConfigError, ConfigErrors, closest
from trainprobe.config.hook_config import DebuggerHookConfig, TensorBoardOutputConfig
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.config.rules import ProfilerRule, Rule

__all__ = [
    "MAX_DEBUG_RULES",
    "MAX_PROFILER_RULES",
    "TrainingJobRequest",
    "UpdateTrainingJobRequest",
    "validate_training_job_name",
]

MAX_DEBUG_RULES = 20
MAX_PROFILER_RULES = 20

# SageMaker's TrainingJobName: 1 to 63 letters, digits and hyphens, starting and ending with a
# letter or digit.
_TRAINING_JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")

# Every member of SageMaker's CreateTrainingJob request, so a misspelt one can be named.
_CREATE_FIELDS = (
    "TrainingJobName",
    "HyperParameters",
    "AlgorithmSpecification",
    "RoleArn",
    "InputDataConfig",
    "OutputDataConfig",
    "ResourceConfig",
    "VpcConfig",
    "StoppingCondition",
    "Tags",
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
    "CheckpointConfig",
    "DebugHookConfig",
    "DebugRuleConfigurations",
    "TensorBoardOutputConfig",
    "ExperimentConfig",
    "ProfilerConfig",
    "ProfilerRuleConfigurations",
    "Environment",
    "RetryStrategy",
    "RemoteDebugConfig",
    "InfraCheckConfig",
    "SessionChainingConfig",
    "ServerlessJobConfig",
    "MlflowConfig",
    "ModelPackageConfig",
)
_UPDATE_FIELDS = (
    "TrainingJobName",
    "ProfilerConfig",
    "ProfilerRuleConfigurations",
    "ResourceConfig",
    "RemoteDebugConfig",
)
# The members this module turns into objects; the rest pass through untouched.
_PARSED_CREATE_FIELDS = frozenset(
    {
        "TrainingJobName",
        "HyperParameters",
        "Environment",
        "DebugHookConfig",
        "DebugRuleConfigurations",
        "TensorBoardOutputConfig",
        "ProfilerConfig",
        "ProfilerRuleConfigurations",
    }
)

T = TypeVar("T")


def validate_training_job_name(name: object, field_name: str = "TrainingJobName") -> str:
    """``name`` if SageMaker would accept it as a training job name, else a ConfigError."""
    if not isinstance(name, str) or not _TRAINING_JOB_NAME.fullmatch(name):
        raise ConfigError(
            field_name,
            name,
            "a job name is 1 to 63 letters, digits and hyphens, "
            "starting and ending with a letter or digit",
        )
    return name


class _Problems:
    """Collects the errors of one request, each placed at its path in the request."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def check(self, path: str, parse: Callable[[], T]) -> T | None:
        """The result of ``parse()``, or None with its errors recorded under ``path``."""
        try:
            return parse()
        except ConfigErrors as errors:
            self.errors += [error.at(path) for error in errors]
        except ConfigError as error:
            self.errors.append(error.at(path))
        return None

    def add(self, error: ConfigError) -> None:
        self.errors.append(error)

    def raise_if_any(self) -> None:
        if self.errors:
            raise ConfigErrors(self.errors)


def _check_members(
    request: Mapping[str, Any], allowed: tuple[str, ...], problems: _Problems
) -> None:
    for key in request:
        if key not in allowed:
            problems.add(
                ConfigError(
                    key,
                    request[key] if not isinstance(request[key], (dict, list)) else "...",
                    f"{key!r} is not a member of the request",
                    suggestion=closest(key, allowed),
                )
            )


def _string_map(path: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(path, value, "a JSON object whose keys and values are strings")
    return dict(value)


def _parse_rules(
    problems: _Problems,
    path: str,
    value: object,
    parse_one: Callable[[dict[str, Any]], T],
    limit: int,
) -> list[T]:
    if not isinstance(value, list):
        problems.add(ConfigError(path, value, "a JSON list of rule configurations"))
        return []
    if len(value) > limit:
        problems.add(
            ConfigError(path, f"{len(value)} rules", f"at most {limit} rules can run in one job")
        )
    rules: list[T] = []
    names: set[str] = set()
    for index, item in enumerate(value):
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            problems.add(ConfigError(item_path, item, "a JSON object describing one rule"))
            continue
        rule = problems.check(item_path, functools.partial(parse_one, item))
        if rule is None:
            continue
        name = item.get("RuleConfigurationName")
        if name in names:
            problems.add(
                ConfigError(
                    f"{item_path}.RuleConfigurationName",
                    name,
                    "each rule needs its own name: two rules cannot write the same rule output",
                )
            )
        names.add(str(name))
        rules.append(rule)
    return rules


@dataclass
class TrainingJobRequest:
    """A CreateTrainingJob request, with the Debugger parts turned into trainprobe's objects."""

    training_job_name: str
    hyperparameters: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    debug_hook_config: DebuggerHookConfig | None = None
    debug_rules: list[Rule] = field(default_factory=list)
    tensorboard_output_config: TensorBoardOutputConfig | None = None
    profiler_config: ProfilerConfig | None = None
    profiler_rules: list[ProfilerRule] = field(default_factory=list)
    other: dict[str, Any] = field(default_factory=dict)
    """The request's other members (OutputDataConfig, ResourceConfig, ...), as they came."""

    @classmethod
    def from_request_dict(cls, request: Mapping[str, Any]) -> TrainingJobRequest:
        """Parse and validate a CreateTrainingJob request; every problem is raised together."""
        problems = _Problems()
        _check_members(request, _CREATE_FIELDS, problems)
        if "TrainingJobName" not in request:
            problems.add(ConfigError("TrainingJobName", None, "a training job needs a name"))
        name = problems.check("", lambda: validate_training_job_name(request["TrainingJobName"]))

        def optional(key: str, parse: Callable[[Any], T]) -> T | None:
            if key not in request:
                return None
            return problems.check(key, lambda: parse(request[key]))

        hyperparameters = optional("HyperParameters", lambda v: _string_map("", v))
        environment = optional("Environment", lambda v: _string_map("", v))
        hook = optional("DebugHookConfig", DebuggerHookConfig.from_request_dict)
        tensorboard = optional("TensorBoardOutputConfig", TensorBoardOutputConfig.from_request_dict)
        profiler = optional("ProfilerConfig", ProfilerConfig.from_request_dict)
        debug_rules = _parse_rules(
            problems,
            "DebugRuleConfigurations",
            request.get("DebugRuleConfigurations", []),
            Rule.from_request_dict,
            MAX_DEBUG_RULES,
        )
        profiler_rules = _parse_rules(
            problems,
            "ProfilerRuleConfigurations",
            request.get("ProfilerRuleConfigurations", []),
            ProfilerRule.from_request_dict,
            MAX_PROFILER_RULES,
        )
        problems.raise_if_any()
        assert name is not None
        return cls(
            training_job_name=name,
            hyperparameters=hyperparameters or {},
            environment=environment or {},
            debug_hook_config=hook,
            debug_rules=debug_rules,
            tensorboard_output_config=tensorboard,
            profiler_config=profiler,
            profiler_rules=profiler_rules,
            other={k: v for k, v in request.items() if k not in _PARSED_CREATE_FIELDS},
        )

    def to_request_dict(self) -> dict[str, Any]:
        """The request as SageMaker's JSON; parsing it back gives an equal request."""
        request: dict[str, Any] = {"TrainingJobName": self.training_job_name}
        if self.hyperparameters:
            request["HyperParameters"] = dict(self.hyperparameters)
        if self.environment:
            request["Environment"] = dict(self.environment)
        if self.debug_hook_config is not None:
            request["DebugHookConfig"] = self.debug_hook_config._to_request_dict()
        if self.debug_rules:
            request["DebugRuleConfigurations"] = [
                rule.to_debugger_rule_config_dict() for rule in self.debug_rules
            ]
        if self.tensorboard_output_config is not None:
            request["TensorBoardOutputConfig"] = self.tensorboard_output_config._to_request_dict()
        if self.profiler_config is not None:
            request["ProfilerConfig"] = self.profiler_config._to_request_dict()
        if self.profiler_rules:
            request["ProfilerRuleConfigurations"] = [
                rule.to_profiler_rule_config_dict() for rule in self.profiler_rules
            ]
        request.update(self.other)
        return request


@dataclass
class UpdateTrainingJobRequest:
    """An UpdateTrainingJob request: new profiling settings and profiler rules for a running job."""

    training_job_name: str
    profiler_config: ProfilerConfig | None = None
    profiler_rules: list[ProfilerRule] = field(default_factory=list)
    other: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_request_dict(cls, request: Mapping[str, Any]) -> UpdateTrainingJobRequest:
        """Parse and validate an UpdateTrainingJob request; every problem is raised together."""
        problems = _Problems()
        _check_members(request, _UPDATE_FIELDS, problems)
        if "TrainingJobName" not in request:
            problems.add(ConfigError("TrainingJobName", None, "name the job to update"))
        name = problems.check("", lambda: validate_training_job_name(request["TrainingJobName"]))
        profiler = None
        if "ProfilerConfig" in request:
            profiler = problems.check(
                "ProfilerConfig",
                lambda: ProfilerConfig.from_update_request_dict(request["ProfilerConfig"]),
            )
        profiler_rules = _parse_rules(
            problems,
            "ProfilerRuleConfigurations",
            request.get("ProfilerRuleConfigurations", []),
            ProfilerRule.from_request_dict,
            MAX_PROFILER_RULES,
        )
        if profiler is None and not profiler_rules and not problems.errors:
            problems.add(
                ConfigError(
                    "ProfilerConfig",
                    None,
                    "an update needs a ProfilerConfig or ProfilerRuleConfigurations",
                )
            )
        problems.raise_if_any()
        assert name is not None
        return cls(
            training_job_name=name,
            profiler_config=profiler,
            profiler_rules=profiler_rules,
            other={
                k: v for k, v in request.items() if k in ("ResourceConfig", "RemoteDebugConfig")
            },
        )

    def to_request_dict(self) -> dict[str, Any]:
        """The request as SageMaker's JSON."""
        request: dict[str, Any] = {"TrainingJobName": self.training_job_name}
        if self.profiler_config is not None:
            request["ProfilerConfig"] = self.profiler_config._to_update_request_dict()
        if self.profiler_rules:
            request["ProfilerRuleConfigurations"] = [
                rule.to_profiler_rule_config_dict() for rule in self.profiler_rules
            ]
        request.update(self.other)
        return request
