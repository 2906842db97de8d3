"""Whether a job's runner is still alive, and what to record when it is not.

A runner beats every ``HEARTBEAT_SECONDS`` (``JobStore.heartbeat``). On its own host a runner
is gone as soon as its process is; elsewhere, or when it hangs, once it has not beaten for
``HEARTBEAT_TIMEOUT_SECONDS``.

A process id is reused once its process has ended, so the process found under the runner's id
must be shown to be the runner itself, by what cannot drift (``process_identity``): on Linux its
start in clock ticks since the boot (``/proc/PID/stat``), with the boot's id; where there is no
``/proc``, the job's name on the runner's command line (``--job NAME``). Never by a wall-clock
start time: that is the boot time plus the ticks, and a boot time read in whole seconds or a
clock stepped by NTP moves every process's start by a second or more.

The first reader that finds a job's runner gone settles the job (``settle``): a job still
running becomes Failed, saying what happened, and its rules that had not finished are reported
as such. Its outputs stay where they are, readable.
"""

from __future__ import annotations

import datetime
import itertools
import os
import socket
import time

import psutil

from trainprobe.config.statuses import SecondaryStatus, TrainingJobStatus
from trainprobe.jobs.store import JobRecord, JobStore

__all__ = [
    "HEARTBEAT_SECONDS",
    "HEARTBEAT_TIMEOUT_SECONDS",
    "process_identity",
    "process_start_time",
    "runner_gone_reason",
    "settle",
]

HEARTBEAT_SECONDS = 2.0
HEARTBEAT_TIMEOUT_SECONDS = 60.0

_PROC = "/proc"
_START_TICKS_FIELD = 21
"""``starttime``'s place among the fields of ``/proc/PID/stat`` after the command's name (the
22nd field; the name, in parentheses, may itself hold spaces and parentheses)."""


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None if there is none: for
    people to read (it moves with the clock: ``process_identity`` tells processes apart)."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def process_identity(pid: int) -> str | None:
    """What tells process ``pid`` apart from any other that had or will have its id, and stays
    the same for as long as it runs: ``BOOT-ID:TICKS``, its start in clock ticks since the
    machine booted, as Linux's ``/proc`` gives it. None without ``/proc`` (or without the
    process)."""
    try:
        with open(os.path.join(_PROC, str(pid), "stat"), "rb") as file:
            stat = file.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        ticks = int(fields[_START_TICKS_FIELD - 2])
    except (OSError, ValueError, IndexError):
        return None
    try:
        with open(os.path.join(_PROC, "sys", "kernel", "random", "boot_id"), "rb") as file:
            boot = file.read().decode("ascii", "replace").strip()
    except OSError:
        boot = ""
    return f"{boot}:{ticks}"


def _local_runner_alive(record: JobRecord) -> bool:
    assert record.runner_pid is not None
    try:
        process = psutil.Process(record.runner_pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
    except psutil.Error:
        return False
    if record.runner_identity is not None:
        identity = process_identity(record.runner_pid)
        if identity is not None:
            return identity == record.runner_identity
    return _runs_job(process, record.name)


def _runs_job(process: psutil.Process, name: str) -> bool:
    """Whether ``process`` is the runner of the job ``name``, by its command line (where
    ``process_identity`` cannot be read): the launcher starts it with ``--job NAME``."""
    try:
        words = process.cmdline()
    except psutil.AccessDenied:
        return True  # another user's process may be a runner too: its heartbeat will tell
    except psutil.Error:
        return False
    return any(
        word == "--job" and following.casefold() == name.casefold()
        for word, following in itertools.pairwise(words)
    )


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="seconds")


def runner_gone_reason(record: JobRecord, now: float | None = None) -> str | None:
    """Why the runner of ``record`` is known to be gone, or None while it runs (or is done)."""
    if record.runner_done or record.runner_pid is None:
        return None
    now = time.time() if now is None else now
    who = f"the job runner (process {record.runner_pid} on {record.runner_host})"
    last = _clock(record.heartbeat_time or record.runner_started)
    if record.runner_host == socket.gethostname() and not _local_runner_alive(record):
        return f"{who} ended before the job did (its last heartbeat was at {last})"
    beat = record.heartbeat_time or record.runner_started or record.creation_time
    if now - beat > HEARTBEAT_TIMEOUT_SECONDS:
        return f"{who} has not reported since {last}"
    return None


def settle(store: JobStore, record: JobRecord) -> JobRecord:
    """``record``, brought up to date when its runner is gone (see the module docstring)."""
    reason = runner_gone_reason(record)
    if reason is None:
        return record
    if not record.finished:
        store.transition(
            record.name,
            TrainingJobStatus.FAILED,
            SecondaryStatus.FAILED,
            f"Job runner lost: {reason}",
            only_if_status=(TrainingJobStatus.IN_PROGRESS, TrainingJobStatus.STOPPING),
            failure_reason=(
                f"InternalServerError: {reason}; the training and the rules it ran were stopped. "
                f"What they wrote until then is in {record.job_dir}."
            ),
            training_end_time=record.training_end_time or time.time(),
            runner_done=True,
        )
    else:
        store.update(record.name, runner_done=True, touch=False)
    settled = store.get(record.name)
    assert settled is not None
    return settled
