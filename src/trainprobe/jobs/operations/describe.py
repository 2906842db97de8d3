"""DescribeTrainingJob: a job's status, times, rule statuses and outputs, in SageMaker's shape.

Times are timezone-aware ``datetime`` objects, as boto3 returns them. The request's members
that SageMaker echoes are echoed; the output configurations are shown as the job uses them:
each with its ``S3OutputPath`` (the root; the job writes ``<root>/<job>/debug-output`` and so on,
as on SageMaker) and its ``LocalPath``, the directory the job's files are in. Reading a job
whose runner has died settles it first (``trainprobe.jobs.runner.liveness``), so the answer says
what happened.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import Any

from trainprobe.config.errors import closest
from trainprobe.config.statuses import TERMINAL_JOB_STATUSES, UNFINISHED_RULE_STATUSES
from trainprobe.config.training_job import training_job_name_of, validate_training_job_name
from trainprobe.jobs.errors import JobNotFound
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.jobs.operations.rule_statuses import evaluation_statuses
from trainprobe.jobs.runner.liveness import settle
from trainprobe.jobs.store import JobRecord, JobStore
from trainprobe.storage.job_layout import JobLayout

__all__ = [
    "describe_record",
    "describe_training_job",
    "find_job",
    "is_final",
    "layout_at",
    "layout_of",
    "rule_evaluation_statuses",
    "timestamp",
]

# Request members DescribeTrainingJob returns as they were given.
_ECHOED = (
    "HyperParameters",
    "AlgorithmSpecification",
    "RoleArn",
    "InputDataConfig",
    "VpcConfig",
    "StoppingCondition",
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
    "CheckpointConfig",
    "DebugRuleConfigurations",
    "ExperimentConfig",
    "Environment",
    "RetryStrategy",
    "RemoteDebugConfig",
    "InfraCheckConfig",
    "MlflowConfig",
    "ModelPackageConfig",
)


def timestamp(seconds: float | None) -> datetime.datetime | None:
    """A time from the store as boto3 gives times: an aware datetime in UTC."""
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)


def find_job(store: JobStore, request: Mapping[str, Any]) -> JobRecord:
    """The job a request's TrainingJobName names, settled; JobNotFound when there is none."""
    name = validate_training_job_name(request.get("TrainingJobName"))
    record = store.get(name)
    if record is None:
        raise JobNotFound(
            "TrainingJobName",
            name,
            "the name of an existing training job (see list_training_jobs)",
            suggestion=closest(name, store.names()),
        )
    return settle(store, record)


def _parent(path: str) -> str:
    """The root a job directory ``<root>/<job>/<kind>-output`` is under."""
    return os.path.dirname(os.path.dirname(path))


def _output_configs(record: JobRecord, layout: JobLayout) -> dict[str, Any]:
    request = record.request
    outputs: dict[str, Any] = {
        "OutputDataConfig": {
            **(request.get("OutputDataConfig") or {}),
            "S3OutputPath": os.path.dirname(layout.output_dir),
        },
        "ModelArtifacts": {"S3ModelArtifacts": layout.model_dir},
    }
    if "DebugHookConfig" in request or request.get("DebugRuleConfigurations"):
        outputs["DebugHookConfig"] = {
            **(request.get("DebugHookConfig") or {}),
            "S3OutputPath": _parent(layout.debug_output),
            "LocalPath": layout.debug_output,
        }
    if record.profiler_config is not None:
        profiler = dict(record.profiler_config)
        if not profiler.get("DisableProfiler"):
            profiler["S3OutputPath"] = _parent(layout.profiler_output)
        outputs["ProfilerConfig"] = profiler
    if "TensorBoardOutputConfig" in request:
        outputs["TensorBoardOutputConfig"] = {
            **request["TensorBoardOutputConfig"],
            "LocalPath": layout.tensorboard_output,
        }
    return outputs


def _transitions(record: JobRecord) -> list[dict[str, Any]]:
    transitions = []
    for entry in record.transitions:
        shown = dict(entry)
        for key in ("StartTime", "EndTime"):
            if key in shown:
                shown[key] = timestamp(shown[key])
        transitions.append(shown)
    return transitions


def layout_of(record: JobRecord) -> JobLayout:
    """Where the files of the job ``record`` are."""
    return layout_at(record.job_dir)


def layout_at(job_dir: str) -> JobLayout:
    """Where the files of the job whose directory is ``job_dir`` are: as its launch plan says."""
    try:
        return LaunchPlan.read(job_dir).layout
    except (OSError, ValueError, KeyError):
        # The job failed before its launch plan was written (or was not started by a job
        # runner): the default places.
        return JobLayout.for_job(os.path.basename(job_dir), os.path.dirname(job_dir))


def describe_record(record: JobRecord) -> dict[str, Any]:
    """DescribeTrainingJob's response for the job ``record``."""
    layout = layout_of(record)
    response: dict[str, Any] = {
        "TrainingJobName": record.name,
        "TrainingJobArn": record.arn,
        "TrainingJobStatus": record.status,
        "SecondaryStatus": record.secondary_status,
    }
    if record.failure_reason:
        response["FailureReason"] = record.failure_reason
    for key in _ECHOED:
        if key in record.request:
            response[key] = record.request[key]
    response.setdefault("StoppingCondition", {})
    resources = dict(record.request.get("ResourceConfig") or {})
    resources.setdefault("InstanceCount", 1)
    resources.setdefault("InstanceType", "local")
    response["ResourceConfig"] = resources
    response.update(_output_configs(record, layout))
    response["CreationTime"] = timestamp(record.creation_time)
    if record.training_start_time is not None:
        response["TrainingStartTime"] = timestamp(record.training_start_time)
    if record.training_end_time is not None:
        response["TrainingEndTime"] = timestamp(record.training_end_time)
        if record.training_start_time is not None:
            seconds = record.training_end_time - record.training_start_time
            response["TrainingTimeInSeconds"] = max(0, round(seconds))
    response["LastModifiedTime"] = timestamp(record.last_modified_time)
    response["SecondaryStatusTransitions"] = _transitions(record)
    lost = "the job's runner ended before the rule did" if record.runner_done else None
    debug_rules = record.request.get("DebugRuleConfigurations") or []
    if debug_rules:
        response["DebugRuleEvaluationStatuses"] = evaluation_statuses(
            record.name, layout, debug_rules, runner_lost=lost, since=record.creation_time
        )
    if record.profiler_rules:
        response["ProfilerRuleConfigurations"] = record.profiler_rules
        response["ProfilerRuleEvaluationStatuses"] = evaluation_statuses(
            record.name, layout, record.profiler_rules, runner_lost=lost, since=record.creation_time
        )
    profiling = record.profiler_config is not None and not record.profiler_config.get(
        "DisableProfiler"
    )
    response["ProfilingStatus"] = "Enabled" if profiling else "Disabled"
    return response


def describe_training_job(
    request: Mapping[str, Any], *, store: JobStore | None = None
) -> dict[str, Any]:
    """SageMaker's DescribeTrainingJob: ``{"TrainingJobName": ...}`` in, the job's description
    out (see the module docstring). JobNotFound for an unknown name."""
    store = store if store is not None else JobStore()
    name = training_job_name_of(request)
    return describe_record(find_job(store, {"TrainingJobName": name}))


def rule_evaluation_statuses(description: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every rule's status in a DescribeTrainingJob response, debugging rules first."""
    return [
        *(description.get("DebugRuleEvaluationStatuses") or []),
        *(description.get("ProfilerRuleEvaluationStatuses") or []),
    ]


def is_final(description: Mapping[str, Any]) -> bool:
    """Whether a DescribeTrainingJob response says the job and every one of its rules have
    reached their final status."""
    return description["TrainingJobStatus"] in TERMINAL_JOB_STATUSES and all(
        rule["RuleEvaluationStatus"] not in UNFINISHED_RULE_STATUSES
        for rule in rule_evaluation_statuses(description)
    )
