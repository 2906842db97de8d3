"""CreateTrainingJob: check the request, lay out the job's files, record it, start its runner.

Everything that can be wrong with a request is found before anything is written
(``trainprobe.jobs.operations.admission``: the request's content, the name already taken, the
outputs, the entry point). Then creation is one transaction: the job's row is inserted holding the
job store's write lock, its directories and config files are made, and only then is the row
committed (InProgress, Starting); if making them fails, nothing is left behind, neither the row
nor a directory. Its runner is then started as a process of its own
(``trainprobe.jobs.runner.job_runner``), which outlives the caller: ``create_training_job`` returns
at once, as SageMaker's does. If the runner cannot be started, the job is taken back whole too, so a
client's retry of the same name is a new creation, never ResourceInUse.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from trainprobe.config.statuses import SecondaryStatus, TrainingJobStatus
from trainprobe.jobs.errors import JobStartError
from trainprobe.jobs.launch_plan import plan_launch, write_config_files
from trainprobe.jobs.operations.admission import Admission, admit_training_job, default_output_root
from trainprobe.jobs.operations.arns import training_job_arn
from trainprobe.jobs.processes.runner_watch import WAKE_SIGNAL
from trainprobe.jobs.runner.liveness import process_identity, process_start_time
from trainprobe.jobs.store import JobRecord, JobStore
from trainprobe.storage.job_layout import JobLayout

__all__ = ["create_training_job", "default_output_root", "lay_out_job"]


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
    Raises ConfigErrors for a request that cannot run, JobNameInUse when the name is taken,
    JobStartError when the job could not be made (nothing of it is left).
    """
    store = store if store is not None else JobStore()
    cwd = os.path.abspath(cwd or os.getcwd())
    admission = admit_training_job(request, store=store, cwd=cwd, output_root=output_root)
    name = admission.request.training_job_name
    layout = admission.layout
    now = time.time()
    arn = training_job_arn(name)
    record = JobRecord(
        name=name,
        arn=arn,
        request=dict(request),
        job_dir=layout.job_dir,
        status=TrainingJobStatus.IN_PROGRESS,
        secondary_status=SecondaryStatus.STARTING,
        creation_time=now,
        last_modified_time=now,
        transitions=[
            {
                "Status": SecondaryStatus.STARTING,
                "StartTime": now,
                "StatusMessage": "Starting the job",
            }
        ],
        profiler_config=request.get("ProfilerConfig"),
        profiler_rules=list(request.get("ProfilerRuleConfigurations") or []),
    )
    made: list[str] = []
    try:
        with store.inserting(record):
            made = lay_out_job(admission, cwd)
    except OSError as error:
        JobLayout.remove(made)
        raise JobStartError(
            "TrainingJobName", name, f"a job whose files can be made ({error})"
        ) from None
    try:
        runner = _start_runner(store, name, layout)
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        store.delete(name)
        JobLayout.remove(made)
        raise JobStartError(
            "TrainingJobName", name, f"a job whose runner can start ({error})"
        ) from None
    store.update(
        name,
        runner_pid=runner.pid,
        runner_host=socket.gethostname(),
        runner_started=process_start_time(runner.pid),
        runner_identity=process_identity(runner.pid),
        heartbeat_time=time.time(),
        touch=False,
    )
    return {"TrainingJobArn": arn}


def lay_out_job(admission: Admission, cwd: str) -> list[str]:
    """Make the job's directories and files; the directories made (see ``JobLayout.create``).
    On an error, what was made is removed before it is raised."""
    layout = admission.layout
    made = layout.create()
    try:
        # Planned again, now unpacking a source archive into the job's code directory.
        plan = plan_launch(admission.request, layout, cwd=cwd)
        write_config_files(admission.request, admission.raw, layout)
        plan.write()
    except BaseException:
        JobLayout.remove(made)
        raise
    return made


_runners: list[subprocess.Popen[bytes]] = []
"""The runners this process started, kept to collect their exit statuses."""


def _start_runner(store: JobStore, name: str, layout: JobLayout) -> subprocess.Popen[bytes]:
    _runners[:] = [runner for runner in _runners if runner.poll() is None]
    os.makedirs(layout.logs_dir, exist_ok=True)
    # The runner starts with the wake signal ignored (an ignored signal stays ignored across
    # exec) until it installs its handler: a StopTrainingJob right after the create must not
    # kill it with the signal's default action.
    command = [
        *("/bin/sh", "-c", f"trap '' {WAKE_SIGNAL.name.removeprefix('SIG')}; exec \"$@\"", "sh"),
        *(sys.executable, "-m", "trainprobe.jobs.runner.job_runner"),
    ]
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
