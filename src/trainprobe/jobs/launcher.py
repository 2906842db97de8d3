"""CreateTrainingJob: check the request, record the job, lay out its files, start its runner.

Everything that can be wrong with a request is found before anything starts: the request's
shape and Debugger configuration (``TrainingJobRequest``), the entry point and the outputs
(``trainprobe.jobs.launch_plan``), a name already taken (JobNameInUse), an output directory
that already holds another run's files. Then the job is recorded (InProgress, Starting), its
directories and config files are written, and its runner is started as a process of its own
(``trainprobe.jobs.supervisor``), which outlives the caller: ``create_training_job`` returns
at once, as SageMaker's does.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.config.training_job import TrainingJobRequest
from trainprobe.jobs.arns import training_job_arn
from trainprobe.jobs.errors import JobNameInUse
from trainprobe.jobs.launch_plan import output_roots, plan_launch, write_config_files
from trainprobe.jobs.liveness import process_start_time
from trainprobe.jobs.store import JobRecord, JobStore, trainprobe_home
from trainprobe.storage.job_layout import JobLayout

__all__ = ["create_training_job", "default_output_root"]


def default_output_root() -> str:
    """Where jobs write when the request names no output: ``$TRAINPROBE_HOME/output``."""
    return os.path.join(trainprobe_home(), "output")


def _check_fresh(layout: JobLayout) -> None:
    for directory in (layout.job_dir, layout.debug_output, layout.profiler_output):
        if os.path.isdir(directory) and os.listdir(directory):
            raise ConfigError(
                "TrainingJobName",
                os.path.basename(layout.job_dir),
                f"a name whose output directory is new: {directory} already holds files "
                "(of another run); choose another job name or output path",
            )


def create_training_job(
    request: Mapping[str, Any],
    *,
    store: JobStore | None = None,
    cwd: str | None = None,
    output_root: str | None = None,
) -> dict[str, Any]:
    """Start the training job ``request`` (SageMaker's CreateTrainingJob request) describes.

    Returns SageMaker's response, ``{"TrainingJobArn": ...}``. Relative paths in the request
    are taken from ``cwd`` (default: the current directory); outputs go under
    OutputDataConfig's S3OutputPath, else ``output_root``, else ``$TRAINPROBE_HOME/output``.
    Raises ConfigError / ConfigErrors for a request that cannot run, JobNameInUse when the
    name is taken.
    """
    parsed = TrainingJobRequest.from_request_dict(request)
    store = store if store is not None else JobStore()
    cwd = os.path.abspath(cwd or os.getcwd())
    name = parsed.training_job_name
    if store.get(name) is not None:
        raise JobNameInUse("TrainingJobName", name, "a name no other job has")
    roots = output_roots(request, cwd, output_root or default_output_root())
    layout = JobLayout.for_job(
        name,
        roots["output_root"] or default_output_root(),
        debug_root=roots["debug_root"],
        profiler_root=roots["profiler_root"],
        tensorboard_root=roots["tensorboard_root"],
    )
    _check_fresh(layout)
    plan = plan_launch(parsed, layout, cwd=cwd)
    now = time.time()
    arn = training_job_arn(name)
    store.insert(
        JobRecord(
            name=name,
            arn=arn,
            request=dict(request),
            job_dir=layout.job_dir,
            status="InProgress",
            secondary_status="Starting",
            creation_time=now,
            last_modified_time=now,
            transitions=[
                {"Status": "Starting", "StartTime": now, "StatusMessage": "Starting the job"}
            ],
            profiler_config=request.get("ProfilerConfig"),
            profiler_rules=list(request.get("ProfilerRuleConfigurations", [])),
        )
    )
    try:
        layout.create()
        write_config_files(parsed, request, layout)
        plan.write()
        runner = _start_runner(store, name, layout)
    except Exception as error:
        store.transition(
            name,
            "Failed",
            "Failed",
            "The job could not be started",
            failure_reason=f"InternalServerError: the job could not be started: {error}",
            runner_done=True,
        )
        raise
    store.update(
        name,
        runner_pid=runner.pid,
        runner_host=socket.gethostname(),
        runner_started=process_start_time(runner.pid),
        heartbeat_time=time.time(),
        touch=False,
    )
    return {"TrainingJobArn": arn}


_runners: list[subprocess.Popen[bytes]] = []
"""The runners this process started, kept to collect their exit statuses."""


def _start_runner(store: JobStore, name: str, layout: JobLayout) -> subprocess.Popen[bytes]:
    _runners[:] = [runner for runner in _runners if runner.poll() is None]
    os.makedirs(layout.logs_dir, exist_ok=True)
    command = [sys.executable, "-m", "trainprobe.jobs.supervisor"]
    with open(layout.runner_log, "ab") as log:
        runner = subprocess.Popen(
            [*command, "--store", store.path, "--job", name],
            cwd=layout.job_dir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _runners.append(runner)
    return runner
