"""The detailed and Python profiling sessions of a run, started and stopped at step boundaries.

At a step's start, the profiles of the step before are finished first (a Python profile's
segment ends, a torch.profiler session whose range is over is written), then the step's own begin
if their ranges cover it. At the end of the forward pass a Python profile moves to its second
segment. Before step 0 a Python profile runs from the profiler's creation (``prestepzero``), and
after ``close()`` one runs to the end of the process (``posthookclose``).

A failure stops that kind of profiling for the rest of the run (``fail`` is told; the owner's
``off`` set says which kinds are stopped). Pyinstrument missing is said once and skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from trainprobe.capture.pytorch.profiling.detailed import DetailedProfiling
from trainprobe.capture.pytorch.profiling.python_profiling import (
    ProfilerUnavailable,
    PythonProfiling,
)
from trainprobe.config.metrics_config import PythonProfiler, cProfileTimer
from trainprobe.config.profiler_config import ProfilingPlan
from trainprobe.storage.trace_file import ProfilePoint

__all__ = ["ProfilingSessions"]

log = logging.getLogger(__name__)


def _now_us() -> float:
    return time.time() * 1e6


class ProfilingSessions:
    """torch.profiler and Python profiler sessions, driven by the step's moments."""

    def __init__(
        self,
        out_dir: str,
        node_id: str,
        off: set[str],
        fail: Callable[[str, BaseException], None],
    ) -> None:
        self.detailed = DetailedProfiling(out_dir, node_id)
        self.python = PythonProfiling(out_dir, node_id)
        self._off = off
        self._fail = fail
        self._said_unavailable = False

    @property
    def running(self) -> bool:
        """Whether any session is recording."""
        return self.python.running or self.detailed.running

    def finish_step(self, mode: str, step: int, at_us: float, keep_detailed: bool) -> None:
        """Step ``step`` (of ``mode``) starts at ``at_us``: end what the step before had."""
        if self.python.running:
            self.stop_python(ProfilePoint(mode, step, "stepstart", at_us))
        if self.detailed.running and not keep_detailed:
            self._stop_detailed()

    def begin_step(
        self, plan: ProfilingPlan, mode: str, step: int, detailed: bool, python: bool
    ) -> None:
        """Start the sessions that cover step ``step``."""
        if detailed:
            try:
                if self.detailed.running:
                    self.detailed.step_started(step)
                else:
                    self.detailed.start(step)
            except Exception as error:
                self._fail("detailed", error)
        if python:
            point = ProfilePoint(mode, step, "stepstart", _now_us())
            self.start_python(plan, point, plan.python_timer_at(step))

    def forward_ended(self, plan: ProfilingPlan, mode: str, step: int, at_us: float) -> None:
        """The forward pass of ``step`` ended at ``at_us``: a Python profile starts anew."""
        if not self.python.running:
            return
        self.stop_python(ProfilePoint(mode, step, "forwardpassend", at_us))
        point = ProfilePoint(mode, step, "forwardpassend", _now_us())
        self.start_python(plan, point, plan.python_timer_at(step))

    def stop_all(self, mode: str, step: int, phase: str) -> None:
        """End every session now (profiling is disabled or the profiler closes)."""
        if self.python.running:
            self.stop_python(ProfilePoint(mode, step, phase, _now_us()))
        if self.detailed.running:
            self._stop_detailed()

    def start_python(
        self, plan: ProfilingPlan, point: ProfilePoint, timer: cProfileTimer | None
    ) -> None:
        """Start a Python profile at ``point`` with the plan's profiler."""
        profiler = plan.python_profiler or PythonProfiler.CPROFILE
        if "python" in self._off or (
            profiler is PythonProfiler.PYINSTRUMENT and self._said_unavailable
        ):
            return
        try:
            self.python.start(point, profiler, timer)
        except ProfilerUnavailable as error:
            self._said_unavailable = True
            log.warning("trainprobe: %s; Python profiling is skipped", error)
        except Exception as error:
            self._fail("python", error)

    def stop_python(self, point: ProfilePoint) -> None:
        """End the Python profile at ``point`` and write it."""
        try:
            self.python.stop(point)
        except Exception as error:
            self._fail("python", error)

    def abandon(self, part: str) -> None:
        """Stop, without writing, the sessions a failure of ``part`` stops."""
        try:
            if part in ("python", "profiler") and self.python.running:
                self.python.abandon()
            if part in ("detailed", "profiler") and self.detailed.running:
                self.detailed.abandon()
        except Exception:
            log.debug("trainprobe: stopping a profiler after a failure failed", exc_info=True)

    def _stop_detailed(self) -> None:
        try:
            self.detailed.stop()
        except Exception as error:
            self._fail("detailed", error)
