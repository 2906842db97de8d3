"""StopTrainingJob, UpdateTrainingJob and a profile request: change a running job from any
process.

Stopping records the request in the job store (the job is Stopping at once) and wakes the job's
runner, which stops the training (SIGTERM, then SIGKILL after a grace period) and ends the job
Stopped. Updating replaces the job's profiler config file, which the system monitor and the
training watch: a new sampling interval or ``DisableProfiler`` applies within an interval, with
no restart. New profiler rules are added to the job in the store and the runner is woken: it
starts an evaluator for them, which reads the job's profiler data from its beginning and
concludes at the job's end, as the rules given at creation do. Updating a job that is not
InProgress (Stopping, or ended) is refused, as is stopping an ended job: a JobStateError
(SageMaker's ValidationException) naming the job's status.

A profile request (``trainprobe profile JOB --steps N``, or UpdateTrainingJob with trainprobe's
``ProfilingParameters`` key ``ProfileNextSteps``) asks the job's flight recorder to capture the
next N steps of its training with torch.profiler: the request file goes into the job's profiler
output, which the training looks at twice a second (``trainprobe.storage.flight_captures``).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping
from typing import Any

from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.config.statuses import SecondaryStatus, TrainingJobStatus
from trainprobe.config.training_job import (
    MAX_PROFILER_RULES,
    UpdateTrainingJobRequest,
    training_job_name_of,
)
from trainprobe.jobs.errors import JobStateError
from trainprobe.jobs.launch_plan import write_profiler_config
from trainprobe.jobs.operations.describe import find_job, layout_of
from trainprobe.jobs.processes.runner_watch import WAKE_SIGNAL
from trainprobe.jobs.store import JobRecord, JobStore
from trainprobe.storage.flight_captures import check_capture_steps, write_profile_request

__all__ = [
    "PROFILE_NEXT_STEPS",
    "STOPPED_BY_REQUEST",
    "profile_training_job",
    "stop_training_job",
    "update_training_job",
]

PROFILE_NEXT_STEPS = "ProfileNextSteps"
"""The ``ProfilingParameters`` key of an UpdateTrainingJob request that asks for a capture."""

STOPPED_BY_REQUEST = "Stopped by a StopTrainingJob request"


def _wake_runner(record: JobRecord) -> None:
    if record.runner_pid is None or record.runner_host != socket.gethostname():
        return  # it reads the store every tick anyway
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(record.runner_pid, WAKE_SIGNAL)


def _refuse(record: JobRecord, operation: str) -> JobStateError:
    return JobStateError(
        "TrainingJobName",
        record.name,
        f"a job in progress: {operation} was refused because the job is {record.status}",
    )


def stop_training_job(
    request: Mapping[str, Any], *, store: JobStore | None = None, reason: str | None = None
) -> dict[str, Any]:
    """SageMaker's StopTrainingJob: ``{"TrainingJobName": ...}``; returns ``{}``.

    The job is Stopping at once and Stopped once its training has ended; ``reason`` (default:
    a StopTrainingJob request) is recorded. Stopping a job that is already stopping changes
    nothing; a finished job is a JobStateError.
    """
    store = store if store is not None else JobStore()
    request = {"TrainingJobName": training_job_name_of(request)}
    record = find_job(store, request)
    if record.status == TrainingJobStatus.STOPPING:
        return {}
    if record.status != TrainingJobStatus.IN_PROGRESS:
        raise _refuse(record, "StopTrainingJob")
    why = reason or STOPPED_BY_REQUEST
    moved = store.transition(
        record.name,
        TrainingJobStatus.STOPPING,
        SecondaryStatus.STOPPING,
        f"Stopping the training job: {why}",
        only_if_status=(TrainingJobStatus.IN_PROGRESS,),
        stop_reason=why,
    )
    if not moved:
        latest = find_job(store, request)
        if latest.status != TrainingJobStatus.STOPPING:
            raise _refuse(latest, "StopTrainingJob")
    _wake_runner(record)
    return {}


def _updated_profiler_config(record: JobRecord, update: ProfilerConfig) -> dict[str, Any]:
    current = ProfilerConfig.from_request_dict(record.profiler_config or {})
    return current.updated_by(update)._to_request_dict()


def _added_profiler_rules(
    record: JobRecord, new_rules: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The job's profiler rules with ``new_rules`` added; ConfigErrors for a name another rule
    of the job has (debugging rules included: each rule writes ``rule-output/<name>/``) or for
    more rules than a job may have."""
    debug_rules = record.request.get("DebugRuleConfigurations") or []
    existing = {
        str(rule.get("RuleConfigurationName")).casefold()
        for rule in [*debug_rules, *record.profiler_rules]
    }
    problems = []
    for index, rule in enumerate(new_rules):
        name = rule.get("RuleConfigurationName")
        if str(name).casefold() in existing:
            problems.append(
                ConfigError(
                    f"ProfilerRuleConfigurations[{index}].RuleConfigurationName",
                    name,
                    "a name no other rule of the job has, whatever its case",
                )
            )
    total = len(record.profiler_rules) + len(new_rules)
    if total > MAX_PROFILER_RULES:
        problems.append(
            ConfigError(
                "ProfilerRuleConfigurations",
                f"{len(new_rules)} more rules (the job has {len(record.profiler_rules)})",
                f"at most {MAX_PROFILER_RULES} profiler rules in one job",
            )
        )
    if problems:
        raise ConfigErrors(problems)
    return [*record.profiler_rules, *new_rules]


def update_training_job(
    request: Mapping[str, Any], *, store: JobStore | None = None
) -> dict[str, Any]:
    """SageMaker's UpdateTrainingJob for a running job: a new ProfilerConfig (merged into the
    one in force) and more ProfilerRuleConfigurations, which start on the running job (see the
    module docstring). Returns ``{"TrainingJobArn": ...}``; JobStateError when the job is not
    in progress."""
    request, capture_steps = _profile_next_steps(request)
    if capture_steps is not None:
        profile = {"TrainingJobName": training_job_name_of(request), "Steps": capture_steps}
        if not any(request.get(key) for key in ("ProfilerConfig", "ProfilerRuleConfigurations")):
            return {"TrainingJobArn": profile_training_job(profile, store=store)["TrainingJobArn"]}
    update = UpdateTrainingJobRequest.from_request_dict(request)
    if update.other:
        key = next(iter(update.other))
        raise ConfigError(
            key,
            "...",
            "absent: the local job runner updates ProfilerConfig and ProfilerRuleConfigurations",
        )
    store = store if store is not None else JobStore()
    record = find_job(store, request)
    if record.status != TrainingJobStatus.IN_PROGRESS:
        raise _refuse(record, "UpdateTrainingJob")
    layout = layout_of(record)
    changes: dict[str, Any] = {}
    if update.profiler_config is not None:
        try:
            changes["profiler_config"] = _updated_profiler_config(record, update.profiler_config)
        except ConfigErrors as errors:
            raise ConfigErrors([error.at("ProfilerConfig") for error in errors]) from None
    new_rules = [rule.to_profiler_rule_config_dict() for rule in update.profiler_rules]
    if new_rules:
        changes["profiler_rules"] = _added_profiler_rules(record, new_rules)
    if not store.update(record.name, only_if_status=(TrainingJobStatus.IN_PROGRESS,), **changes):
        raise _refuse(find_job(store, request), "UpdateTrainingJob")
    if "profiler_config" in changes:
        write_profiler_config(changes["profiler_config"], layout)
    if new_rules:
        _wake_runner(record)
    if capture_steps is not None:
        profile_training_job(profile, store=store)
    return {"TrainingJobArn": record.arn}


def _profile_next_steps(request: Mapping[str, Any]) -> tuple[Mapping[str, Any], int | None]:
    """``request`` without its ``ProfilingParameters.ProfileNextSteps``, and that number."""
    profiler = request.get("ProfilerConfig")
    parameters = profiler.get("ProfilingParameters") if isinstance(profiler, Mapping) else None
    if not isinstance(parameters, Mapping):
        return request, None
    key = next((k for k in parameters if str(k).lower() == PROFILE_NEXT_STEPS.lower()), None)
    if key is None:
        return request, None
    field = f"ProfilerConfig.ProfilingParameters.{PROFILE_NEXT_STEPS}"
    value = parameters[key]
    text = str(value).strip()
    steps = check_capture_steps(int(text) if text.isdigit() else value, field)
    rest = {k: v for k, v in parameters.items() if k != key}
    assert isinstance(profiler, Mapping)
    config = {k: v for k, v in profiler.items() if k != "ProfilingParameters"}
    if rest:
        config["ProfilingParameters"] = rest
    without = {k: v for k, v in request.items() if k != "ProfilerConfig"}
    if config:
        without["ProfilerConfig"] = config
    return without, steps


def profile_training_job(
    request: Mapping[str, Any], *, store: JobStore | None = None, requested_by: str = "the user"
) -> dict[str, Any]:
    """Capture the next ``Steps`` steps of a running job: ``{"TrainingJobName": ..., "Steps":
    N}``. Returns the job's ARN and the request written. JobStateError when the job is not in
    progress or does not profile its framework (no flight recorder runs in its training)."""
    steps = check_capture_steps(request.get("Steps"), "Steps")
    store = store if store is not None else JobStore()
    record = find_job(store, request)
    if record.status != TrainingJobStatus.IN_PROGRESS:
        raise _refuse(record, "a profile request")
    config = ProfilerConfig.from_request_dict(record.profiler_config or {})
    if config.disable_profiler or config.framework_profile_params is None:
        raise JobStateError(
            "TrainingJobName",
            record.name,
            "a job that profiles its framework (ProfilerConfig with ProfilingParameters): "
            "only there does the training run the flight recorder",
        )
    written = write_profile_request(
        layout_of(record).profiler_output, steps, requested_by=requested_by
    )
    return {"TrainingJobArn": record.arn, "ProfileRequest": written.to_json()}
