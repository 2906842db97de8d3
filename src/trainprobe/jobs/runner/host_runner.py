"""``python -m trainprobe.jobs.host_runner``: run one host of a job, on the machine it is run on.

The job runner starts all of a job's hosts on its own machine. To spread them over several
machines, each machine runs one host with this command, given the same CreateTrainingJob request
(its outputs on storage every machine writes to, its ``InstanceCount`` the number of machines)
and the address of ``algo-1``'s machine, where torchrun's rendezvous listens::

    python -m trainprobe.jobs.host_runner --request job.json --host algo-2 \\
        --master-addr 10.0.0.1 --master-port 29500

The request is checked and the job's directory laid out on this machine as CreateTrainingJob
does (a directory a host of the same job laid out already, on a shared file system, is used as
it is: start ``algo-1`` first there); then the host starts the same two processes the job
runner starts for it (``trainprobe.jobs.runner.hosts``): the training, a torchrun node, and the
system monitor with ``--node-id`` the host's name. It ends when the training ends, with its exit
status; SIGTERM or Ctrl-C stops the training first. The rules and the report are not run here:
run them on the job's outputs (``trainprobe rules run``, ``trainprobe report``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from trainprobe import settings
from trainprobe.config.training_job import TrainingJobRequest
from trainprobe.jobs.child_process import describe_exit
from trainprobe.jobs.launch_plan import LaunchPlan, output_roots
from trainprobe.jobs.operations.admission import admit_training_job, default_output_root
from trainprobe.jobs.operations.create import lay_out_job
from trainprobe.jobs.runner.hosts import (
    MONITOR_GRACE_SECONDS,
    Rendezvous,
    host_launch,
    host_names,
    start_monitor,
)
from trainprobe.jobs.runner.training_process import TrainingProcess
from trainprobe.storage.job_layout import JobLayout, launch_file_of

__all__ = ["main"]


def run_host(plan: LaunchPlan, host: str, rendezvous: Rendezvous) -> int:
    """Run ``host`` of the job ``plan`` describes to its end; the training's exit status."""
    names = host_names(plan.instance_count)
    if host not in names:
        raise SystemExit(f"--host: {host!r} is not one of the job's hosts {', '.join(names)}")
    launch = host_launch(plan, names.index(host), rendezvous)
    environment = settings.child_environment(
        launch.environment, {settings.RUNNER_PID.name: str(os.getpid())}
    )
    training = TrainingProcess(
        launch.command,
        cwd=plan.working_dir,
        environment=environment,
        log_path=plan.layout.training_log,
    )
    monitor = start_monitor(plan, host, training.pid)

    def stop(signum: int, frame: FrameType | None) -> None:
        training.child.signal_group(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    returncode = training.child.wait()
    assert returncode is not None
    grace = settings.STOP_GRACE_SECONDS.get()
    training.stop(grace)
    training.finish()
    monitor.finish(MONITOR_GRACE_SECONDS, grace)
    print(f"{host}: the training {describe_exit(returncode)}", file=sys.stderr)
    return returncode


def lay_out(request_file: str, cwd: str) -> LaunchPlan:
    """Check the CreateTrainingJob request in ``request_file`` and lay its job out here (as
    ``create_training_job`` does, without a job store or a runner); its launch plan. A job
    directory another host of the job laid out already (on a shared file system) is used as
    it is."""
    with open(request_file, encoding="utf-8") as file:
        request = json.load(file)
    name = TrainingJobRequest.from_request_dict(request).training_job_name
    root = output_roots(request, cwd, default_output_root())["output_root"]
    assert root is not None
    job_dir = JobLayout.for_job(name, root, local_root=default_output_root()).job_dir
    if os.path.isfile(launch_file_of(job_dir)):
        return LaunchPlan.read(job_dir)
    # Another machine's host may have written the job's outputs (to a bucket) already.
    admission = admit_training_job(request, cwd=cwd, fresh=False)
    lay_out_job(admission, cwd)
    return LaunchPlan.read(admission.layout.job_dir)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one host from the command line; returns the training's exit status."""
    parser = argparse.ArgumentParser(prog="python -m trainprobe.jobs.host_runner")
    parser.add_argument(
        "--request", required=True, help="the job's CreateTrainingJob request, a JSON file"
    )
    parser.add_argument("--host", required=True, help="this host's name: algo-1, algo-2, ...")
    parser.add_argument(
        "--master-addr", required=True, help="the address algo-1's machine is reached at"
    )
    parser.add_argument(
        "--master-port", type=int, default=29500, help="the rendezvous port (default 29500)"
    )
    arguments = parser.parse_args(argv)
    try:
        plan = lay_out(arguments.request, os.getcwd())
    except (OSError, ValueError) as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return 2
    rendezvous = Rendezvous(arguments.master_addr, arguments.master_port)
    returncode = run_host(plan, arguments.host, rendezvous)
    return returncode if returncode >= 0 else 128 - returncode


if __name__ == "__main__":
    sys.exit(main())
