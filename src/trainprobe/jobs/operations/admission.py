"""Whether a CreateTrainingJob request can run here: every check of creation, and nothing written.

``admit_training_job`` is what ``trainprobe validate``, ``trainprobe jobs create``, the HTTP API
and the Estimator run before a job exists, so they accept and refuse the same requests:

1. the request's content (``TrainingJobRequest``: shapes, names, rules, profiling), every problem
   at once;
2. what only this machine can say, once the content is valid: the job's name is free in the job
   store, the outputs are local directories this user can write (not a file, no NUL) or ``s3://``
   URLs whose bucket answers, the job's output directories hold no other run's files, the entry
   point exists (a source archive holds the script), input channels are local directories, the
   rule executor (``TRAINPROBE_RULE_EXECUTOR``) is local or a Dask cluster that answers.

It reads the disk and the job store but writes nothing; ``trainprobe.jobs.operations.create``
creates the job from its answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainprobe import settings
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.training_job import TrainingJobRequest
from trainprobe.jobs.errors import JobNameInUse
from trainprobe.jobs.launch_plan import LaunchPlan, output_roots, plan_launch
from trainprobe.jobs.runner.rule_executor_choice import check_rule_executor
from trainprobe.jobs.store import JobStore, trainprobe_home
from trainprobe.storage import files
from trainprobe.storage.job_layout import JobLayout, check_output_root

__all__ = ["Admission", "admit_training_job", "default_output_root"]


def default_output_root() -> str:
    """Where jobs write when the request names no output: ``$TRAINPROBE_HOME/output``."""
    return os.path.join(trainprobe_home(), "output")


@dataclass(frozen=True)
class Admission:
    """A request found able to run: what creating the job needs."""

    request: TrainingJobRequest
    raw: Mapping[str, Any]
    """The request as it came."""
    layout: JobLayout
    plan: LaunchPlan
    """The launch plan; its entry point may still need its source archive unpacked."""


def _check_fresh(layout: JobLayout) -> list[ConfigError]:
    blocked = layout.blocked()
    if blocked is not None:
        return [
            ConfigError(
                "TrainingJobName",
                os.path.basename(layout.job_dir),
                f"a name whose output directories can be made: {blocked} is in the way "
                "(it is not a directory); choose another job name or output path",
            )
        ]
    for directory in (layout.job_dir, *layout.outputs()):
        if files.holds_files(directory):
            return [
                ConfigError(
                    "TrainingJobName",
                    os.path.basename(layout.job_dir),
                    f"a name whose output directory is new: {directory} already holds files "
                    "(of another run); choose another job name or output path",
                )
            ]
    return []


_ROOT_FIELDS = {
    "output_root": "OutputDataConfig.S3OutputPath",
    "debug_root": "DebugHookConfig.S3OutputPath",
    "profiler_root": "ProfilerConfig.S3OutputPath",
    "tensorboard_root": "TensorBoardOutputConfig.S3OutputPath",
}


def _check_rule_executor(request: TrainingJobRequest) -> list[ConfigError]:
    """The rule executor the request's Environment (else this process's) names, checked."""
    name = settings.RULE_EXECUTOR.name
    field = f"Environment.{name}" if name in request.environment else f"${name}"
    try:
        check_rule_executor(settings.child_environment(request.environment), field)
    except ConfigError as error:
        return [error]
    return []


def admit_training_job(
    request: Mapping[str, Any],
    *,
    store: JobStore | None = None,
    cwd: str | None = None,
    output_root: str | None = None,
    fresh: bool = True,
) -> Admission:
    """The checked request and its plan, or ConfigErrors (JobNameInUse for a name in use).

    With ``fresh`` (the default) outputs that already hold files are refused; a host joining a
    job another machine started (``python -m trainprobe.jobs.host_runner``) writes beside them.

    Relative paths are taken from ``cwd`` (default: the current directory); outputs go under
    OutputDataConfig's S3OutputPath, else ``output_root``, else ``$TRAINPROBE_HOME/output``.
    Without a ``store`` the name is not looked up.
    """
    parsed = TrainingJobRequest.from_request_dict(request)
    name = parsed.training_job_name
    if store is not None and store.get(name) is not None:
        raise JobNameInUse("TrainingJobName", name, "a name no other job has")
    cwd = os.path.abspath(cwd or os.getcwd())
    errors: list[ConfigError] = []
    roots = output_roots(request, cwd, output_root or default_output_root())
    checked: set[str] = set()
    for key, root in roots.items():
        if root is not None and root not in checked:
            checked.add(root)
            try:
                check_output_root(root, _ROOT_FIELDS[key])
            except ConfigError as error:
                errors.append(error)
    layout = JobLayout.for_job(
        name,
        roots["output_root"] or default_output_root(),
        debug_root=roots["debug_root"],
        profiler_root=roots["profiler_root"],
        tensorboard_root=roots["tensorboard_root"],
        local_root=default_output_root(),
    )
    if fresh and not errors:  # what is in an output that cannot be used does not matter
        errors += _check_fresh(layout)
    try:
        plan = plan_launch(parsed, layout, cwd=cwd, unpack=False)
    except ConfigError as error:
        errors += error.problems()
    errors += _check_rule_executor(parsed)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)
    return Admission(parsed, request, layout, plan)
