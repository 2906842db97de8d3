"""A job's hosts: SageMaker's names for them, and what each one runs.

A job with ``ResourceConfig.InstanceCount`` N runs as N hosts, named as SageMaker names them
(``algo-1`` ... ``algo-N``). Each host is one torchrun node (``--nnodes N --node-rank i``, one
training process per host) of one torch.distributed job, whose rendezvous is torchrun's static
one on the first host (``--master-addr``/``--master-port``); each host has its own
``SM_CURRENT_HOST`` (``SM_HOSTS`` lists them all) and its own system monitor
(``--node-id algo-i``), and all write to the job's storage. One host runs the script as a plain
process, without torchrun.

The job runner starts every host on this machine, with the rendezvous on 127.0.0.1
(``trainprobe.jobs.processes.local_torchrun``, the loopback interface only);
``python -m trainprobe.jobs.host_runner`` starts one host of the same job on a machine of its
own, with the same commands built here.
"""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import dataclass

from trainprobe import settings
from trainprobe.jobs.child_process import ChildProcess
from trainprobe.jobs.entry_point import LOCAL_TORCHRUN_MODULE, LOOPBACK
from trainprobe.jobs.launch_plan import LaunchPlan

__all__ = [
    "HOST_PREFIX",
    "MONITOR_GRACE_SECONDS",
    "HostLaunch",
    "Rendezvous",
    "host_launch",
    "host_names",
    "start_monitor",
]

HOST_PREFIX = "algo-"
_TORCHRUN_MODULE = "torch.distributed.run"


def host_names(count: int) -> list[str]:
    """The names of a job's ``count`` hosts, as SageMaker names them: ``algo-1`` ..."""
    return [f"{HOST_PREFIX}{index}" for index in range(1, count + 1)]


@dataclass(frozen=True)
class Rendezvous:
    """Where the hosts of one job meet: the first host's address and a port it listens on."""

    address: str
    port: int

    @property
    def loopback(self) -> bool:
        """Whether every host runs on this machine (the rendezvous is on 127.0.0.1)."""
        return self.address == LOOPBACK

    @classmethod
    def on_loopback(cls) -> Rendezvous:
        """A rendezvous on 127.0.0.1, at a port free now."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((LOOPBACK, 0))
            return cls(LOOPBACK, int(probe.getsockname()[1]))


@dataclass(frozen=True)
class HostLaunch:
    """How to start one host's training: its name, its rank among the hosts (0 for
    ``algo-1``), its command line, and the variables set for it over the job's."""

    name: str
    rank: int
    command: list[str]
    environment: dict[str, str]


def host_launch(plan: LaunchPlan, rank: int, rendezvous: Rendezvous | None) -> HostLaunch:
    """The launch of host ``rank`` (from 0) of the job ``plan`` describes; ``rendezvous`` is
    needed when the job has several hosts."""
    count = plan.instance_count
    names = host_names(count)
    if not 0 <= rank < count:
        raise ValueError(f"host rank {rank} is not one of the job's {count} hosts")
    environment = {
        **plan.environment,
        settings.CURRENT_HOST.name: names[rank],
        "SM_HOSTS": json.dumps(names),
    }
    if count == 1:
        return HostLaunch(names[rank], rank, list(plan.command), environment)
    if rendezvous is None:
        raise ValueError(f"a job of {count} hosts needs a rendezvous")
    torchrun = [plan.python, "-m", _TORCHRUN_MODULE]
    if rendezvous.loopback:
        # Every port the hosts open is on the loopback interface, and so is their traffic.
        torchrun = [plan.python, "-m", LOCAL_TORCHRUN_MODULE, "--local-addr", LOOPBACK]
        loopback = "lo" if sys.platform.startswith("linux") else "lo0"
        environment["GLOO_SOCKET_IFNAME"] = loopback
        environment["NCCL_SOCKET_IFNAME"] = loopback
    command = [
        *torchrun,
        *("--nnodes", str(count), "--node-rank", str(rank), "--nproc-per-node", "1"),
        *("--rdzv-backend", "static"),
        *("--master-addr", rendezvous.address, "--master-port", str(rendezvous.port)),
        *plan.command[
            1:
        ],  # the script as a module: -m trainprobe.jobs.processes.training_entry ...
    ]
    return HostLaunch(names[rank], rank, command, environment)


MONITOR_GRACE_SECONDS = 10.0
"""How long a host's system monitor has to finish its files once its training has ended."""


def start_monitor(plan: LaunchPlan, host: str, training_pid: int) -> ChildProcess:
    """Start the system monitor of ``host``, watching the training whose process is
    ``training_pid``, writing to the job's profiler output. OSError when it cannot start."""
    command = [
        *(plan.python, "-m", "trainprobe.capture.system_monitor"),
        *("--out", plan.layout.profiler_output),
        *("--interval-ms", str(plan.monitor_interval_ms)),
        *("--pid", str(training_pid)),
        *("--config", plan.layout.profiler_config_file),
        *("--node-id", host),
    ]
    return ChildProcess(
        f"system monitor of {host}",
        command,
        cwd=plan.layout.job_dir,
        log_path=plan.layout.monitor_log,
    )
