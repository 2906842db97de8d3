"""A job's processes watch their runner, and stop when it is gone.

A job runner killed outright (SIGKILL, a crash) cannot stop what it started, so each process
it starts (the training's entry, each rule evaluator) runs a daemon thread that looks every
``interval`` seconds whether the runner (``$TRAINPROBE_RUNNER_PID``) still exists, and calls
``on_gone`` once when it does not: the training interrupts itself (its hook closes its files as
on Ctrl-C), a rule stops and records Stopped. Nothing keeps running unsupervised.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

from trainprobe import settings

__all__ = ["END_WITHIN_SECONDS", "WAKE_SIGNAL", "end_within", "process_exists", "watch_runner"]

WAKE_SIGNAL = signal.SIGUSR1
"""What wakes a job's runner to look at once (a rule asked to stop, a StopTrainingJob)."""

END_WITHIN_SECONDS = 30.0
"""How long a job's process asked to stop may take to end before it kills itself (longer when
the job's stop grace, ``TRAINPROBE_STOP_GRACE_SECONDS``, is longer)."""


def end_within(seconds: float | None = None, before: Callable[[], None] | None = None) -> None:
    """Kill this process (SIGKILL) if it still runs ``seconds`` from now (default: the longer of
    ``END_WITHIN_SECONDS`` and the stop grace plus as much again).

    Armed when a job's process is asked to stop: unwinding can hang (a native call that never
    returns, a write to a pipe no one reads), and with the runner gone no one else would end it.
    ``before`` runs first (say what became of the work), whatever it raises.
    """
    if seconds is None:
        seconds = max(END_WITHIN_SECONDS, 2 * settings.STOP_GRACE_SECONDS.get())

    def end() -> None:
        try:
            if before is not None:
                before()
        finally:
            os.kill(os.getpid(), signal.SIGKILL)

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()


def process_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        import psutil

        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except Exception:
        return True


def watch_runner(
    runner_pid: int, on_gone: Callable[[], None], *, interval: float = 0.5
) -> threading.Thread:
    """Start a daemon thread that calls ``on_gone`` once the process ``runner_pid`` is gone."""

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(interval):
            if not process_exists(runner_pid):
                on_gone()
                return

    thread = threading.Thread(target=watch, name="trainprobe-runner-watch", daemon=True)
    thread.start()
    return thread
