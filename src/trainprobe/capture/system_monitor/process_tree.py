"""The training process and its descendants (data loader workers, compile workers): CPU and memory.

Finding descendants means scanning every process on the host, which costs far more than sampling
a few of them, so the tree is looked up again only every ``refresh_seconds`` (5 s); in between,
the known members are sampled. A member found by a refresh counts from then on; one that exits
between two samples loses its last slice of CPU time. Memory is the sum of resident set sizes, so
pages shared between processes (fork's copy-on-write) count once per process, as ``top`` shows.
"""

from __future__ import annotations

import math
import time

import psutil

from trainprobe.storage import system_metrics as sm
from trainprobe.storage.system_metrics import Reading

__all__ = ["ProcessTree"]

CPU_PERCENT = sm.MetricKey(sm.PROCESS, sm.TRAINING_PROCESS, sm.PROCESS_CPU_PERCENT)
MEMORY_BYTES = sm.MetricKey(sm.PROCESS, sm.TRAINING_PROCESS, sm.PROCESS_MEMORY_USED_BYTES)
COUNT = sm.MetricKey(sm.PROCESS, sm.TRAINING_PROCESS, sm.PROCESS_COUNT)


class ProcessTree:
    """Samples process ``pid`` and its descendants; raises psutil.NoSuchProcess if it is gone."""

    def __init__(self, pid: int, *, refresh_seconds: float = 5.0) -> None:
        self.pid = pid
        self.refresh_seconds = refresh_seconds
        self.ended = False
        self._root = psutil.Process(pid)
        # pid -> (process, its CPU seconds at the previous sample, or None before the first)
        self._members: dict[int, tuple[psutil.Process, float | None]] = {}
        self._refreshed_at = -math.inf
        self.restart()

    def running(self, recheck_seconds: float = 1.0) -> bool:
        """Whether the watched process still runs (an exited, unreaped one does not).

        Free within ``recheck_seconds`` of a sample, which looked at the process already.
        """
        if not self.ended and time.monotonic() - self._at >= recheck_seconds:
            try:
                running = self._root.is_running() and self._root.status() != psutil.STATUS_ZOMBIE
            except psutil.Error:
                running = False
            self.ended = not running
        return not self.ended

    def restart(self) -> None:
        """Forget the previous CPU times: the next sample measures from now."""
        self._members = {pid: (process, None) for pid, (process, _) in self._members.items()}
        self._refresh()
        self._at = time.monotonic()

    def sample(self) -> list[Reading]:
        """CPU (percent of one core), resident memory and process count of the whole tree."""
        now = time.monotonic()
        if now - self._refreshed_at >= self.refresh_seconds:
            self._refresh()
        elapsed, self._at = now - self._at, now
        cpu_seconds = 0.0
        resident = 0
        for pid, (process, before) in list(self._members.items()):
            measured = _measure(process)
            if process is self._root and (measured is None or measured[2] == psutil.STATUS_ZOMBIE):
                self.ended = True
            if measured is None:
                del self._members[pid]
                continue
            cpu, rss, _ = measured
            if before is not None:
                cpu_seconds += max(0.0, cpu - before)
            resident += rss
            self._members[pid] = (process, cpu)
        if not self._members:
            return []
        readings: list[Reading] = [(MEMORY_BYTES, resident), (COUNT, len(self._members))]
        if elapsed > 0:
            readings.append((CPU_PERCENT, cpu_seconds / elapsed * 100.0))
        return readings

    def _refresh(self) -> None:
        """Look the tree up again: new descendants join (counting from now), gone ones leave."""
        self._refreshed_at = time.monotonic()
        try:
            current = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            current = [self._root]
        members: dict[int, tuple[psutil.Process, float | None]] = {}
        for process in current:
            known = self._members.get(process.pid)
            if known is not None and known[1] is not None:
                members[process.pid] = known
                continue
            measured = _measure(process)
            if measured is not None:
                members[process.pid] = (process, measured[0])
        self._members = members


def _measure(process: psutil.Process) -> tuple[float, int, str] | None:
    """(CPU seconds so far, resident bytes, status) of a process, or None once it is gone."""
    try:
        with process.oneshot():  # CPU times and status come from one read of /proc/<pid>/stat
            times = process.cpu_times()
            status = process.status()
            rss = process.memory_info().rss
    except psutil.Error:
        return None
    return float(times.user + times.system), int(rss), str(status)
