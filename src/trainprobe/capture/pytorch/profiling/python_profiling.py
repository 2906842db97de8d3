"""Python profiling: cProfile (with one of three clocks) or Pyinstrument, one profile per segment.

Segments are smdebug's (reference/smdebug.md §5.1): in a profiled step, one from the step's start
to the end of its forward pass, and one from there to the next step's start; before the first step
one from the profiler's creation (``prestepzero``); after ``close()`` one to the end of the process
(``posthookclose``). Each is written to ``framework/pytorch/<cprofile|pyinstrument>/<node>/
<start>_<end>/`` as ``python_stats`` (a pstats dump: ``pstats.Stats(path)`` reads it) or, for
Pyinstrument, ``python_stats.json`` and ``python_stats.html``. Beside a cProfile dump,
``cprofile_timer`` names its clock (the directory name, smdebug's, does not), written before the
dump. Files are written atomically.

cProfile's clocks:

- ``total_time``: wall time (``time.perf_counter``);
- ``cpu_time``: the CPU time of the profiled thread (``time.thread_time``);
- ``off_cpu_time``: wall time minus that thread's CPU time, i.e. the time it spent waiting (for
  I/O, locks, a GPU, worker processes). smdebug took process CPU time from ``os.times()``; with
  PyTorch's intra-op threads a process burns more CPU than wall time, so its "off-CPU" clock ran
  backwards and the profile came out negative. The calling thread's CPU time never grows faster
  than the wall clock, so this clock never goes back. cProfile only sees the thread it was enabled
  on, so its CPU time is the right one to subtract.

From Python 3.12 cProfile listens through ``sys.monitoring``, which reports every thread's calls:
another thread's calls (the timeline's writer, a data loader's pin-memory thread) would land in
the profiled thread's call stack, and read with that thread's clocks, which makes every figure
wrong (negative off-CPU times, a sleep that took no time). ``_hear_this_thread_only`` has the
profile's callbacks pass on the profiled thread's events alone, as before 3.12.

Pyinstrument is imported only when asked for; when it is not installed, that is logged once and
Python profiling is skipped.
"""

from __future__ import annotations

import cProfile
import importlib
import logging
import marshal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from trainprobe.config.metrics_config import PythonProfiler, cProfileTimer
from trainprobe.errors import CaptureError
from trainprobe.storage import files
from trainprobe.storage.locations import join
from trainprobe.storage.trace_file import (
    CPROFILE_STATS,
    CPROFILE_TIMER,
    PYINSTRUMENT_HTML,
    PYINSTRUMENT_JSON,
    ProfilePoint,
    python_stats_dir,
)

__all__ = [
    "CPROFILE_STATS",
    "CPROFILE_TIMER",
    "PYINSTRUMENT_HTML",
    "PYINSTRUMENT_JSON",
    "ProfilerUnavailable",
    "PythonProfiling",
    "off_cpu_time",
]

log = logging.getLogger(__name__)

PYINSTRUMENT_INTERVAL = 0.001
"""Pyinstrument samples every millisecond, as SageMaker documents."""


class ProfilerUnavailable(CaptureError):
    """The Python profiler asked for cannot run here (Pyinstrument is not installed)."""


def off_cpu_time() -> float:
    """Seconds this thread has spent not running: wall time minus its CPU time."""
    return time.perf_counter() - time.thread_time()


_CLOCKS: dict[cProfileTimer, Callable[[], float]] = {
    cProfileTimer.TOTAL_TIME: time.perf_counter,
    cProfileTimer.CPU_TIME: time.thread_time,
    cProfileTimer.OFF_CPU_TIME: off_cpu_time,
}


# The events cProfile listens to through sys.monitoring (Python 3.12 and later).
_PROFILE_EVENTS = (
    "PY_START",
    "PY_RESUME",
    "PY_THROW",
    "PY_RETURN",
    "PY_YIELD",
    "PY_UNWIND",
    "CALL",
    "C_RETURN",
    "C_RAISE",
)


def _hear_this_thread_only(profile: cProfile.Profile) -> None:
    """Have the enabled ``profile`` hear only the calling thread's calls (see the module
    docstring); nothing to do before Python 3.12, where it hears no other thread."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return
    tool, thread, current = monitoring.PROFILER_ID, threading.get_ident(), threading.get_ident
    for name in _PROFILE_EVENTS:
        event = getattr(monitoring.events, name, None)
        heard = None if event is None else monitoring.register_callback(tool, event, None)
        if heard is None:
            continue

        def on_this_thread(*arguments: Any, heard: Callable[..., Any] = heard) -> Any:
            return heard(*arguments) if current() == thread else None

        monitoring.register_callback(tool, event, on_this_thread)


class _Session(Protocol):
    def stop(self) -> None: ...

    def outputs(self) -> dict[str, bytes]: ...


class _CProfileSession:
    def __init__(self, timer: cProfileTimer | None) -> None:
        self._timer = timer if timer is not None and timer in _CLOCKS else cProfileTimer.TOTAL_TIME
        self._profile = cProfile.Profile(_CLOCKS[self._timer])
        self._profile.enable()
        _hear_this_thread_only(self._profile)

    def stop(self) -> None:
        self._profile.disable()

    def outputs(self) -> dict[str, bytes]:
        self._profile.create_stats()
        stats = self._profile.stats  # type: ignore[attr-defined]
        # The timer first: a reader that finds the statistics finds their clock too.
        return {
            CPROFILE_TIMER: f"{self._timer.value}\n".encode(),
            CPROFILE_STATS: marshal.dumps(stats),
        }


class _PyinstrumentSession:
    def __init__(self) -> None:
        try:
            module: Any = importlib.import_module("pyinstrument")
            renderers: Any = importlib.import_module("pyinstrument.renderers")
        except ImportError as error:
            raise ProfilerUnavailable(
                "Pyinstrument is not installed (pip install pyinstrument)"
            ) from error
        self._json_renderer = renderers.JSONRenderer
        self._profiler = module.Profiler(interval=PYINSTRUMENT_INTERVAL)
        self._profiler.start()

    def stop(self) -> None:
        self._profiler.stop()

    def outputs(self) -> dict[str, bytes]:
        return {
            PYINSTRUMENT_JSON: str(self._profiler.output(self._json_renderer())).encode(),
            PYINSTRUMENT_HTML: str(self._profiler.output_html()).encode(),
        }


class PythonProfiling:
    """At most one Python profile at a time, started and stopped at segment boundaries."""

    def __init__(self, out_dir: str, node_id: str, framework: str = "pytorch") -> None:
        self.out_dir = out_dir
        self.node_id = node_id
        self.framework = framework
        self.written: list[str] = []
        self._session: _Session | None = None
        self._profiler = PythonProfiler.CPROFILE
        self._start: ProfilePoint | None = None

    @property
    def running(self) -> bool:
        """Whether a profile is being taken."""
        return self._session is not None

    def start(
        self, point: ProfilePoint, profiler: PythonProfiler, timer: cProfileTimer | None
    ) -> None:
        """Start a profile at ``point``; raises ProfilerUnavailable if the profiler is missing."""
        if self._session is not None:
            return
        if profiler is PythonProfiler.PYINSTRUMENT:
            self._session = _PyinstrumentSession()
        else:
            self._session = _CProfileSession(timer)
        self._profiler = profiler
        self._start = point

    def abandon(self) -> None:
        """Stop the profile in progress without writing it."""
        session, self._session = self._session, None
        self._start = None
        if session is not None:
            session.stop()

    def stop(self, point: ProfilePoint) -> str | None:
        """End the profile at ``point`` and write it; returns its directory (None if none ran)."""
        session, self._session = self._session, None
        start, self._start = self._start, None
        if session is None or start is None:
            return None
        session.stop()
        directory = join(
            self.out_dir,
            python_stats_dir(self.framework, self._profiler.value, self.node_id, start, point),
        )
        for name, content in session.outputs().items():
            files.write_atomic(join(directory, name), content)
        self.written.append(directory)
        return directory
