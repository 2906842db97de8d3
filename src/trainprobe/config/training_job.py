"""CreateTrainingJob and UpdateTrainingJob requests: SageMaker's JSON, parsed and validated whole.

A request is checked completely before anything starts, and every problem is reported at once
(``ConfigErrors``), each with its path in the request (``DebugRuleConfigurations[2].RuleParameters
.threshold``). This is the one check of a request's content: ``trainprobe validate``, ``trainprobe
jobs create``, the HTTP API and the Estimator all run it (through
``trainprobe.jobs.operations.admission``, which adds what only the local disk can say). Members
trainprobe does not act on (RoleArn, VpcConfig, ...) are checked against SageMaker's shapes
(``trainprobe.config.request_shapes``) and kept as they came, so a request written for SageMaker
is accepted unchanged and written back unchanged. Names are checked before any path is built
from them (``trainprobe.config.names``): rule names are unique across debugging and profiler
rules (each names a ``rule-output/<rule>/``), input channel names are unique.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trainprobe.config.errors import ConfigError, ConfigErrors, closest
from trainprobe.config.hook_config import DebuggerHookConfig, TensorBoardOutputConfig
from trainprobe.config.json_bounds import embedded_json, nesting_problem
from trainprobe.config.names import validate_training_job_name
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.config.request_shapes import CREATE_MEMBER_SHAPES, string_map_problems
from trainprobe.config.rules import ProfilerRule, Rule

__all__ = [
    "MAX_DEBUG_RULES",
    "MAX_PROFILER_RULES",
    "TrainingJobRequest",
    "UpdateTrainingJobRequest",
    "training_job_name_of",
    "validate_training_job_name",
]

MAX_DEBUG_RULES = 20
MAX_PROFILER_RULES = 20

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


class _Problems:
    """Collects the errors of one request, each placed at its path in the request.

    A value found not to be of its type (``cover``) is reported once: what a parser of the
    member then says about that value, or anything below it, is left out.
    """

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []
        self._covered: set[str] = set()

    def check(self, path: str, parse: Callable[[], T]) -> T | None:
        """The result of ``parse()``, or None with its errors recorded under ``path``."""
        try:
            return parse()
        except ConfigError as found:
            self.errors += [
                error
                for error in (problem.at(path) for problem in found.problems())
                if not self._is_covered(error.field)
            ]
        return None

    def add(self, error: ConfigError) -> None:
        self.errors.append(error)

    def cover(self, errors: list[ConfigError]) -> None:
        """Record ``errors``, each about a value of the wrong type at its field."""
        self.errors += errors
        self._covered.update(error.field for error in errors)

    def _is_covered(self, field: str) -> bool:
        return any(
            field == covered or field.startswith((f"{covered}.", f"{covered}[", f"{covered} "))
            for covered in self._covered
        )

    def raise_if_any(self) -> None:
        if self.errors:
            raise ConfigErrors(self.errors)


def _check_request(
    request: object, allowed: tuple[str, ...], problems: _Problems
) -> tuple[Mapping[str, Any], str | None]:
    """The request's members, each one SageMaker's request has, and the job it names (None when
    that name is missing or wrong); a problem for each other member, for a missing or wrong
    TrainingJobName and for a value that is not a string in a map of strings. A request nested
    too deep is refused at once, with that problem alone: no reader is written for it."""
    if not isinstance(request, Mapping):
        problems.add(ConfigError("request", type(request).__name__, "a JSON object"))
        return {}, None
    too_deep = nesting_problem(request)
    if too_deep is not None:
        raise ConfigErrors([too_deep])
    if "TrainingJobName" not in request:
        problems.add(ConfigError("TrainingJobName", None, "required: every request names its job"))
    for key in request:
        if key not in allowed:
            problems.add(
                ConfigError(
                    key,
                    request[key] if not isinstance(request[key], (dict, list)) else "...",
                    f"{key!r} is not a member of the request",
                    suggestion=closest(str(key), allowed),
                )
            )
    name = None
    if "TrainingJobName" in request:
        name = problems.check("", lambda: validate_training_job_name(request["TrainingJobName"]))
    problems.cover(string_map_problems(request, allowed))
    return request, name


def _check_shapes(request: Mapping[str, Any], problems: _Problems) -> None:
    for key, shape in CREATE_MEMBER_SHAPES.items():
        if request.get(key) is not None:
            problems.cover(shape.problems(request[key], key))


def _check_hyperparameter_json(request: Mapping[str, Any], problems: _Problems) -> None:
    """The training gets each hyperparameter JSON-decoded: one that is JSON must be within
    ``trainprobe.config.json_bounds``' bounds (one that is not JSON stays a string)."""
    for key, value in _string_map(request, "HyperParameters").items():
        problems.check("", functools.partial(_bounded_json, value, f"HyperParameters.{key}"))


def _bounded_json(text: str, field: str) -> None:
    try:
        embedded_json(text, field)
    except ConfigError:
        raise
    except ValueError:  # not JSON: the training gets it as a string
        pass


def _string_map(request: Mapping[str, Any], key: str) -> dict[str, str]:
    """The member ``key`` (checked by ``_check_shapes``), or {} when absent or not strings."""
    value = request.get(key)
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return {}
    return dict(value)


def _check_channel_names(request: Mapping[str, Any], problems: _Problems) -> None:
    """Each input channel becomes ``SM_CHANNEL_<NAME>``: names must differ, whatever their case."""
    channels = request.get("InputDataConfig")
    seen: set[str] = set()
    for index, channel in enumerate(channels if isinstance(channels, list) else []):
        name = channel.get("ChannelName") if isinstance(channel, Mapping) else None
        if not isinstance(name, str):
            continue
        if name.upper() in seen:
            problems.add(
                ConfigError(
                    f"InputDataConfig[{index}].ChannelName",
                    name,
                    "a name no other channel has, whatever its case "
                    "(each becomes SM_CHANNEL_<NAME>)",
                )
            )
        seen.add(name.upper())


def _parse_rules(
    problems: _Problems,
    path: str,
    value: object,
    parse_one: Callable[[dict[str, Any]], T],
    limit: int,
    names: set[str],
) -> list[T]:
    """The rules in ``value``; ``names`` holds the (case-folded) names of the rules already read,
    and this list's are added: two rules of one job cannot share a name, whatever its case."""
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(ConfigError(path, value, "a JSON list of rule configurations"))
        return []
    if len(value) > limit:
        problems.add(
            ConfigError(path, f"{len(value)} rules", f"at most {limit} rules can run in one job")
        )
    rules: list[T] = []
    for index, item in enumerate(value):
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            problems.add(ConfigError(item_path, _shown(item), "a JSON object describing one rule"))
            continue
        name = item.get("RuleConfigurationName")
        if isinstance(name, str) and name.casefold() in names:
            problems.add(
                ConfigError(
                    f"{item_path}.RuleConfigurationName",
                    name,
                    "a name no other rule of the job has, debugging or profiler rule, whatever "
                    "its case: each rule writes rule-output/<name>/",
                )
            )
        if isinstance(name, str):
            names.add(name.casefold())
        rule = problems.check(item_path, functools.partial(parse_one, item))
        if rule is not None:
            rules.append(rule)
    return rules


def _shown(value: object) -> object:
    return "{...}" if isinstance(value, dict) else "[...]" if isinstance(value, list) else value


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
        request, name = _check_request(request, _CREATE_FIELDS, problems)
        _check_shapes(request, problems)
        _check_hyperparameter_json(request, problems)
        _check_channel_names(request, problems)

        def optional(key: str, parse: Callable[[Any], T]) -> T | None:
            if request.get(key) is None:
                return None
            return problems.check(key, lambda: parse(request[key]))

        hook = optional("DebugHookConfig", DebuggerHookConfig.from_request_dict)
        tensorboard = optional("TensorBoardOutputConfig", TensorBoardOutputConfig.from_request_dict)
        profiler = optional("ProfilerConfig", ProfilerConfig.from_request_dict)
        rule_names: set[str] = set()
        debug_rules = _parse_rules(
            problems,
            "DebugRuleConfigurations",
            request.get("DebugRuleConfigurations"),
            Rule.from_request_dict,
            MAX_DEBUG_RULES,
            rule_names,
        )
        profiler_rules = _parse_rules(
            problems,
            "ProfilerRuleConfigurations",
            request.get("ProfilerRuleConfigurations"),
            ProfilerRule.from_request_dict,
            MAX_PROFILER_RULES,
            rule_names,
        )
        problems.raise_if_any()
        assert name is not None
        return cls(
            training_job_name=name,
            hyperparameters=_string_map(request, "HyperParameters"),
            environment=_string_map(request, "Environment"),
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


def training_job_name_of(request: object) -> str:
    """The job a DescribeTrainingJob or StopTrainingJob request names (its one member), checked
    before anything is looked up by it; ConfigErrors naming each problem."""
    problems = _Problems()
    _, name = _check_request(request, ("TrainingJobName",), problems)
    problems.raise_if_any()
    assert name is not None
    return name


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
        request, name = _check_request(request, _UPDATE_FIELDS, problems)
        profiler = None
        if request.get("ProfilerConfig") is not None:
            profiler = problems.check(
                "ProfilerConfig",
                lambda: ProfilerConfig.from_update_request_dict(request["ProfilerConfig"]),
            )
        profiler_rules = _parse_rules(
            problems,
            "ProfilerRuleConfigurations",
            request.get("ProfilerRuleConfigurations"),
            ProfilerRule.from_request_dict,
            MAX_PROFILER_RULES,
            set(),
        )
        other = {k: v for k, v in request.items() if k in ("ResourceConfig", "RemoteDebugConfig")}
        if profiler is None and not profiler_rules and not other and not problems.errors:
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
            other=other,
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
