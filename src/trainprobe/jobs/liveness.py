"""Whether a job's runner is still alive, and what to record when it is not.

A runner beats every ``HEARTBEAT_SECONDS`` (``JobStore.heartbeat``). On its own host a runner
is gone as soon as its process is (the process id is checked with its start time, so a reused
id is not mistaken for it); elsewhere, or when it hangs, once it has not beaten for
``HEARTBEAT_TIMEOUT_SECONDS``. The first reader that finds a job's runner gone settles the job
(``settle``): a job still running becomes Failed, saying what happened, and its rules that had
not finished are reported as such. Its outputs stay where they are, readable.
"""

from __future__ import annotations

import datetime
import socket
import time

import psutil

from trainprobe.jobs.store import JobRecord, JobStore

__all__ = [
    "HEARTBEAT_SECONDS",
    "HEARTBEAT_TIMEOUT_SECONDS",
    "process_start_time",
    "runner_gone_reason",
    "settle",
]

HEARTBEAT_SECONDS = 2.0
HEARTBEAT_TIMEOUT_SECONDS = 60.0
_SAME_START_SECONDS = 1.0


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None if there is none."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def _local_runner_alive(record: JobRecord) -> bool:
    assert record.runner_pid is not None
    try:
        process = psutil.Process(record.runner_pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        started = process.create_time()
    except psutil.Error:
        return False
    return record.runner_started is None or abs(started - record.runner_started) < (
        _SAME_START_SECONDS
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
            "Failed",
            "Failed",
            f"Job runner lost: {reason}",
            only_if_status=("InProgress", "Stopping"),
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
