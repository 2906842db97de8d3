"""The CreateTrainingJob request as the SageMaker SDK builds it, from the SDK's objects.

SageMaker's API runs a request as it is; the SDK's estimator builds it from its objects (Rule,
ProfilerRule, DebuggerHookConfig, ProfilerConfig, ...) and fills it in first. The estimator
(``trainprobe.estimator``) and ``trainprobe run`` both build theirs here, so an option of one
means what the same setting of the other means:

- ``create_training_job_request``: the request for a ``TrainingJobSettings``: the rules split
  into debugging and profiler rules, each debugging rule's actions in its parameters, its
  collections added to the hook's, the script as the SDK's hyperparameters (``SdkScript``) or as
  a container's command (``ContainerCommand``);
- ``job_name_from_base``: ``<base>-YYYY-MM-DD-HH-MM-SS-mmm``, as the SDK names jobs;
- ``with_rule_collections`` and ``with_default_profiler_rule``: the same filling for a request
  already written as SageMaker's JSON.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.config.hook_config import (
    CollectionConfig,
    DebuggerHookConfig,
    TensorBoardOutputConfig,
)
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.config.rules import ProfilerRule, Rule, get_default_profiler_rule

__all__ = [
    "PROGRAM_HYPERPARAMETER",
    "SUBMIT_DIRECTORY_HYPERPARAMETER",
    "ContainerCommand",
    "SdkScript",
    "TrainingJobSettings",
    "create_training_job_request",
    "hook_collections",
    "job_name_from_base",
    "split_rules",
    "with_default_profiler_rule",
    "with_rule_collections",
]

PROGRAM_HYPERPARAMETER = "sagemaker_program"
SUBMIT_DIRECTORY_HYPERPARAMETER = "sagemaker_submit_directory"

_NAME_LIMIT = 63
_NOT_IN_NAMES = re.compile(r"[^a-zA-Z0-9-]+")


def job_name_from_base(base: str, now: datetime.datetime | None = None) -> str:
    """A job name from ``base`` and the time (UTC, to the millisecond), as the SDK makes them."""
    now = now or datetime.datetime.now(tz=datetime.timezone.utc)
    stamp = now.strftime("%Y-%m-%d-%H-%M-%S-") + f"{now.microsecond // 1000:03d}"
    cleaned = _NOT_IN_NAMES.sub("-", base).strip("-") or "job"
    cleaned = cleaned[: _NAME_LIMIT - len(stamp) - 1].rstrip("-")
    return f"{cleaned}-{stamp}"


@dataclass(frozen=True)
class SdkScript:
    """The script as the SDK's framework estimators send it: the ``sagemaker_program`` (relative
    to ``directory``) and ``sagemaker_submit_directory`` hyperparameters beside the user's, every
    value JSON-encoded."""

    program: str
    directory: str
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)

    def encoded_hyperparameters(self) -> dict[str, str]:
        """The HyperParameters member, as sent."""
        values: dict[str, Any] = {
            **self.hyperparameters,
            PROGRAM_HYPERPARAMETER: self.program,
            SUBMIT_DIRECTORY_HYPERPARAMETER: self.directory,
        }
        return {key: json.dumps(value) for key, value in values.items()}


@dataclass(frozen=True)
class ContainerCommand:
    """The script as a container's command (``AlgorithmSpecification.ContainerEntrypoint`` and
    ``ContainerArguments``), as ``trainprobe run`` sends it."""

    entrypoint: Sequence[str]
    arguments: Sequence[str] = ()


@dataclass
class TrainingJobSettings:
    """A training job as the SDK's objects describe it.

    ``debugger_hook_config`` None sends no DebugHookConfig (the estimator's
    ``debugger_hook_config=False``); ``profiler_config`` None sends no ProfilerConfig (the job's
    default then applies); ``output_path`` and ``max_run`` None leave OutputDataConfig and
    StoppingCondition to the job's defaults. ``default_profiler_rule`` adds ProfilerReport when
    profiling is on and no profiler rule is given, as SageMaker Debugger's SDK did before 2.x.
    """

    script: SdkScript | ContainerCommand
    rules: Sequence[Rule | ProfilerRule] = ()
    debugger_hook_config: DebuggerHookConfig | None = None
    profiler_config: ProfilerConfig | None = None
    tensorboard_output_config: TensorBoardOutputConfig | None = None
    output_path: str | None = None
    instance_count: int = 1
    instance_type: str = "local"
    max_run: int | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    input_channels: Sequence[Mapping[str, Any]] = ()
    training_image: str | None = None
    default_profiler_rule: bool = False


def split_rules(rules: Sequence[Rule | ProfilerRule]) -> tuple[list[Rule], list[ProfilerRule]]:
    """The debugging rules and the profiler rules of ``rules``, each in its order."""
    debugging: list[Rule] = []
    profiler: list[ProfilerRule] = []
    for rule in rules:
        if isinstance(rule, Rule):
            debugging.append(rule)
        elif isinstance(rule, ProfilerRule):
            profiler.append(rule)
        else:
            raise ConfigError("rules", rule, "a list of Rule and ProfilerRule objects")
    return debugging, profiler


def hook_collections(
    configured: Sequence[CollectionConfig], rules: Sequence[Rule]
) -> list[CollectionConfig]:
    """The collections the hook saves: those it configures itself, then each collection a rule
    needs that it does not configure (a request configures each collection once)."""
    collections = list(configured)
    present = {collection.name for collection in collections}
    for rule in rules:
        for collection in rule.collection_configs or []:
            if collection.name not in present:
                collections.append(collection)
                present.add(collection.name)
    return collections


def _algorithm(settings: TrainingJobSettings) -> dict[str, Any]:
    algorithm: dict[str, Any] = {"TrainingInputMode": "File"}
    if isinstance(settings.script, ContainerCommand):
        algorithm["ContainerEntrypoint"] = list(settings.script.entrypoint)
        algorithm["ContainerArguments"] = list(settings.script.arguments)
    if settings.training_image is not None:
        algorithm["TrainingImage"] = settings.training_image
    return algorithm


def _hook_request(hook: DebuggerHookConfig, rules: Sequence[Rule]) -> dict[str, Any]:
    request = hook._to_request_dict()
    if request["S3OutputPath"] is None:
        del request["S3OutputPath"]  # the job's output root
    if hook.collection_configs is not None or rules:
        configured = hook_collections(hook.collection_configs or [], rules)
        request["CollectionConfigurations"] = [c._to_request_dict() for c in configured]
    return request


def _profiler_rules(settings: TrainingJobSettings, rules: list[ProfilerRule]) -> list[ProfilerRule]:
    profiler = settings.profiler_config
    profiling = profiler is not None and not profiler.disable_profiler
    if settings.default_profiler_rule and profiling and not rules:
        return [get_default_profiler_rule()]
    return rules


def create_training_job_request(job_name: str, settings: TrainingJobSettings) -> dict[str, Any]:
    """The CreateTrainingJob request for a job named ``job_name`` with ``settings``.

    Each debugging rule's actions go into its parameters (StopTraining naming this job), as the
    SDK's ``prepare_actions`` puts them; raises ConfigError for a rule that is neither a Rule nor
    a ProfilerRule.
    """
    debugging, profiler = split_rules(settings.rules)
    request: dict[str, Any] = {
        "TrainingJobName": job_name,
        "AlgorithmSpecification": _algorithm(settings),
    }
    if isinstance(settings.script, SdkScript):
        request["HyperParameters"] = settings.script.encoded_hyperparameters()
    if settings.output_path is not None:
        request["OutputDataConfig"] = {"S3OutputPath": settings.output_path}
    request["ResourceConfig"] = {
        "InstanceCount": settings.instance_count,
        "InstanceType": settings.instance_type,
    }
    if settings.max_run is not None:
        request["StoppingCondition"] = {"MaxRuntimeInSeconds": settings.max_run}
    if settings.environment:
        request["Environment"] = dict(settings.environment)
    if settings.input_channels:
        request["InputDataConfig"] = [dict(channel) for channel in settings.input_channels]
    for rule in debugging:
        rule.prepare_actions(job_name)
    if debugging:
        request["DebugRuleConfigurations"] = [
            rule.to_debugger_rule_config_dict() for rule in debugging
        ]
    if settings.debugger_hook_config is not None:
        request["DebugHookConfig"] = _hook_request(settings.debugger_hook_config, debugging)
    if settings.tensorboard_output_config is not None:
        request["TensorBoardOutputConfig"] = settings.tensorboard_output_config._to_request_dict()
    profiler_rules = _profiler_rules(settings, profiler)
    if profiler_rules:
        request["ProfilerRuleConfigurations"] = [
            rule.to_profiler_rule_config_dict() for rule in profiler_rules
        ]
    if settings.profiler_config is not None:
        request["ProfilerConfig"] = settings.profiler_config._to_request_dict()
    return request


def with_rule_collections(request: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` with each debugging rule's collections in DebugHookConfig."""
    result = copy.deepcopy(dict(request))
    entries = result.get("DebugRuleConfigurations") or []
    if not entries:
        return result
    hook = result.setdefault("DebugHookConfig", {})
    present = hook.setdefault("CollectionConfigurations", [])
    named = {entry.get("CollectionName") for entry in present}
    rules = [Rule.from_request_dict(entry) for entry in entries]
    present += [
        collection.to_request_dict()
        for collection in hook_collections([], rules)
        if collection.name not in named
    ]
    return result


def with_default_profiler_rule(request: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` with ProfilerReport added when profiling is on and no profiler rule is
    given, debugging rules or not (as SageMaker Debugger's SDK did)."""
    result = copy.deepcopy(dict(request))
    profiler = result.get("ProfilerConfig")
    profiling = isinstance(profiler, Mapping) and not profiler.get("DisableProfiler", False)
    if profiling and not result.get("ProfilerRuleConfigurations"):
        rule = get_default_profiler_rule()
        result["ProfilerRuleConfigurations"] = [rule.to_profiler_rule_config_dict()]
    return result
