"""Whether a slow step was the training's own doing, or the machine's: the thread's run-queue wait.

A step can take longer because the training did more (a larger batch, a data loader that stalled,
extra computation) or because it did not run: another process held the cores it needed. Only the
first is the training's to explain, and a profile of it shows nothing that differs. Linux keeps,
for every thread, the time it spent on a CPU and the time it spent ready to run but waiting for
one (``/proc/thread-self/schedstat``: ``sum_exec_runtime`` and ``run_delay``, in nanoseconds).
``ThreadClock`` reads both for the calling thread at a step's start: one ``pread`` of a file it
keeps open, a few microseconds, no syscall more. Over a slow step, ``contention`` compares the
thread's wait for a core with the step's excess over its median: when the wait accounts for at
least ``CONTENTION_SHARE`` of it, and the step less that wait would not have been slow (over the
threshold), the machine was busy, and the machine's load (``os.getloadavg``, read then only) says
how busy. A step that did more work on a busy machine waits for a core too, but remains slow
without the wait: it is the training's own doing, and profiled.

A wait elsewhere (a data loader's batch, a device, a lock, a sleep) is not a wait for a core: the
thread is not runnable then, and its ``run_delay`` does not grow. Only the training thread is
read: the threads an operator fans out to wait alike when the cores are taken. Where the file is
missing (not Linux, or a kernel without scheduler statistics), ``ThreadClock.read`` gives None and
no step is put down to contention.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass

__all__ = [
    "CONTENTION_SHARE",
    "Contention",
    "ThreadClock",
    "ThreadTimes",
    "contention",
    "cores",
]

CONTENTION_SHARE = 0.5
"""The share of a slow step's excess over its median that the training thread must have spent
waiting for a core for the step to be put down to a busy machine."""

_SCHEDSTAT = "/proc/thread-self/schedstat"


@dataclass(frozen=True)
class ThreadTimes:
    """A thread's time so far: on a CPU, and ready to run but waiting for one (seconds)."""

    ran_s: float
    waited_s: float


class ThreadClock:
    """Reads the calling thread's CPU time and run-queue wait (see the module docstring).

    The file of each thread that reads is opened once and kept (``close`` closes them all)."""

    def __init__(self, path: str = _SCHEDSTAT) -> None:
        self._path = path
        self._files: dict[int, int] = {}
        self._missing = False

    def read(self) -> ThreadTimes | None:
        """The calling thread's times now; None where the system does not keep them."""
        if self._missing:
            return None
        ident = threading.get_ident()
        handle = self._files.get(ident)
        try:
            if handle is None:
                handle = self._files[ident] = os.open(self._path, os.O_RDONLY)
            ran, waited = os.pread(handle, 64, 0).split()[:2]
            return ThreadTimes(int(ran) / 1e9, int(waited) / 1e9)
        except (OSError, ValueError):
            self._missing = True  # not Linux, or no scheduler statistics: not asked again
            self.close()
            return None

    def close(self) -> None:
        """Close the files kept open."""
        handles, self._files = list(self._files.values()), {}
        for handle in handles:
            with contextlib.suppress(OSError):
                os.close(handle)


@dataclass(frozen=True)
class Contention:
    """A slow step the training did not run for most of its excess: the machine was busy."""

    duration_s: float
    median_s: float
    ran_s: float
    """The training thread's time on a CPU during the step."""
    waited_s: float
    """The training thread's time ready to run but waiting for a CPU during the step."""
    load: float | None
    """The machine's load average over the last minute, when the step was judged."""
    cores: int


def cores() -> int:
    """The machine's cores (what its load average is measured against)."""
    return os.cpu_count() or 1


def contention(
    start: ThreadTimes | None,
    end: ThreadTimes | None,
    duration_s: float,
    median_s: float,
    threshold_s: float | None = None,
) -> Contention | None:
    """The slow step between the thread times ``start`` and ``end``, put down to a busy machine
    when its wait for a core accounts for ``CONTENTION_SHARE`` of its excess over ``median_s``
    and, without that wait, it would not have taken more than ``threshold_s`` (the slow-step
    threshold; None: not asked); None when not, or when the times are not known."""
    if start is None or end is None:
        return None
    waited = end.waited_s - start.waited_s
    if waited < CONTENTION_SHARE * (duration_s - median_s):
        return None
    if threshold_s is not None and duration_s - waited > threshold_s:
        return None  # slow even had it run: it did more
    try:
        load: float | None = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = None
    return Contention(duration_s, median_s, end.ran_s - start.ran_s, waited, load, cores())
