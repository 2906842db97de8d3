"""``ProfilerTrial``: a job's profiler output, read window by window while the job runs.

It reads the system metrics (``system/incremental/``, partial minutes included) and the finished
framework timeline files (``framework/pevents/``) under a profiler output directory, and answers
the three questions a rule following a live job needs answered:

- where time starts: ``first_us``, the time of the job's first reading or event;
- up to when the data is complete: ``ready_until_us()``. Every host's system readings must have
  reached a time for it to be complete. Timeline files appear whole when the profiler rotates them
  (every 60 s by default), so the framework data of a time counts as complete once every node's
  files reach it, or, at the latest, ``framework_wait_s`` seconds after the system readings did (a
  training that stopped emitting events, or is still before its first step, must not hold the
  windows back for ever). Before the first timeline file the windows wait that long too: the
  first steps' events may still be in a file not yet rotated. With ``framework_profiling=False``
  (the job records no framework events) only the system readings count;
- whether the job has ended: ``ended()``. The end is known from the marker ``training_job_end.ts``
  in the profiler output directory, or in its ``system/`` or ``framework/`` directory (where smdebug
  looks for it). The job runner writes it once the training and the system monitor have exited; a
  caller that knows the end another way passes ``job_ended``. After the end every window up to the
  newest data is complete.

``window(index, start_us, end_us)`` returns a window's data; ``framework_profiling=False`` marks
the windows of a job known to record no framework events. Timeline files are read once each, and
their events are kept until ``forget_before`` says no window before a time will be asked for again.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable

from trainprobe.rules.profiler_rules.window import Window
from trainprobe.storage import files
from trainprobe.storage.locations import TRAINING_END_FILE, join
from trainprobe.storage.system_metrics import SystemMetricsReader, TimeUnit
from trainprobe.storage.trace_file import TimelineFile, TraceEvent, TraceFileReader

__all__ = ["DEFAULT_FRAMEWORK_WAIT", "END_MARKERS", "ProfilerTrial"]

DEFAULT_FRAMEWORK_WAIT = 90.0
END_MARKERS = (TRAINING_END_FILE, f"system/{TRAINING_END_FILE}", f"framework/{TRAINING_END_FILE}")


class _TimelineFiles(TraceFileReader):
    """The trace reader, reading one file at a time without keeping it (the trial keeps what it
    still needs)."""

    def file_events(self, entry: TimelineFile) -> list[TraceEvent]:
        return self._parse(entry)


class ProfilerTrial:
    """The profiler output under ``profiler_output_dir`` (see the module docstring)."""

    def __init__(
        self,
        profiler_output_dir: str,
        *,
        framework_wait_s: float = DEFAULT_FRAMEWORK_WAIT,
        framework_profiling: bool = True,
        job_ended: Callable[[], bool] | None = None,
    ) -> None:
        self.path = profiler_output_dir
        self.framework_wait_s = framework_wait_s
        self.framework_profiling = framework_profiling
        self._job_ended = job_ended
        self.system = SystemMetricsReader(profiler_output_dir)
        self._timeline = _TimelineFiles(profiler_output_dir)
        self._read_files: set[str] = set()
        self._events: list[TraceEvent] = []
        self._starts: list[float] = []
        self._framework_until: dict[str, float] = {}
        self._forgotten_before = -math.inf
        self.late_events = 0
        self.first_us: float | None = None
        self._system_until: float | None = None
        self._last_window: Window | None = None

    # ----- following the job ----------------------------------------------------------------

    def ended(self) -> bool:
        """Whether the job has ended (its end marker exists, or ``job_ended`` says so)."""
        if self._job_ended is not None and self._job_ended():
            return True
        return any(files.exists(join(self.path, marker)) for marker in END_MARKERS)

    def refresh(self) -> None:
        """Look for new data: new timeline files, newer system readings."""
        for entry in self._timeline.files():
            if entry.path in self._read_files:
                continue
            self._read_files.add(entry.path)
            self._add_events(self._timeline.file_events(entry))
            until = self._framework_until.get(entry.node_id, -math.inf)
            self._framework_until[entry.node_id] = max(until, float(entry.last_end_us))
        latest = []
        for node_id in sorted({entry.node_id for entry in self.system.minute_files()}):
            newest = self.system.last_timestamp(node_id)
            if newest is not None:
                latest.append(newest * 1e6)
        self._system_until = min(latest) if latest else None
        if self.first_us is None:
            self.first_us = self._first_time()

    def ready_until_us(self) -> float | None:
        """Up to when the data is complete (see the module docstring); None before any data."""
        system = self._system_until
        framework = min(self._framework_until.values()) if self._framework_until else None
        if system is None:
            return framework
        if not self.framework_profiling:
            return system
        # Before its first timeline file, a job may still be starting: its events may yet come.
        waited = system - self.framework_wait_s * 1e6
        return min(system, waited if framework is None else max(framework, waited))

    def data_end_us(self) -> float | None:
        """The time of the newest data: the last reading, or the end of the last event."""
        ends = [until for until in self._framework_until.values()]
        newest = self.system.last_timestamp()
        if newest is not None:
            ends.append(newest * 1e6)
        return max(ends) if ends else None

    # ----- windows ---------------------------------------------------------------------------

    def window(self, index: int, start_us: float, end_us: float, *, final: bool = False) -> Window:
        """The data of ``[start_us, end_us)``: readings taken and events started in it."""
        last = self._last_window
        if last is not None and (last.start_us, last.end_us, last.final) == (
            start_us,
            end_us,
            final,
        ):
            return last
        readings = self.system.events(start_us, end_us, TimeUnit.MICROSECONDS)
        low = bisect.bisect_left(self._starts, start_us)
        high = bisect.bisect_left(self._starts, end_us)
        window = Window(
            index=index,
            start_us=start_us,
            end_us=end_us,
            system=readings,
            framework=self._events[low:high],
            job_start_us=self.first_us if self.first_us is not None else start_us,
            final=final,
            framework_expected=self.framework_profiling,
        )
        self._last_window = window
        return window

    def forget_before(self, time_us: float) -> None:
        """Drop the events that started before ``time_us``: no window before it is asked for."""
        cut = bisect.bisect_left(self._starts, time_us)
        if cut:
            del self._events[:cut]
            del self._starts[:cut]
        self._forgotten_before = max(self._forgotten_before, time_us)

    def _add_events(self, events: list[TraceEvent]) -> None:
        kept = [event for event in events if event.start_us >= self._forgotten_before]
        self.late_events += len(events) - len(kept)
        if not kept:
            return
        if not self._events or kept[0].start_us >= self._events[-1].start_us:
            kept.sort(key=lambda event: event.start_us)
            if not self._events or kept[0].start_us >= self._events[-1].start_us:
                self._events.extend(kept)
                self._starts.extend(event.start_us for event in kept)
                return
        self._events.extend(kept)
        self._events.sort(key=lambda event: event.start_us)
        self._starts = [event.start_us for event in self._events]

    def _first_time(self) -> float | None:
        times = []
        if self._starts:
            times.append(self._starts[0])
        minutes = self.system.minute_files()
        if minutes:
            first = min(entry.minute for entry in minutes)
            readings = self.system.events(first - 60, first + 120)
            if readings:
                times.append(readings[0].timestamp * 1e6)
        return min(times) if times else None
