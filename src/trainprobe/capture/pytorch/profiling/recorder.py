"""What goes into the timeline files: the step timeline and data loader profiling's events.

The recorder owns the trace thread (started when framework profiling first turns on), the step
timeline and data loader profiling, and is the listener the DataLoader wrappers tell about
batches and iterators. The profiler tells it when steps start, forward passes end and so on; the
recorder turns that into events and queues them to the thread. ``recording`` is False while
framework profiling is off or after the timeline failed; then every call returns at once.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from trainprobe.capture.pytorch.profiling.dataloader import (
    ITERATOR_GET_NEXT,
    ITERATOR_INITIALIZE,
    WORKER_FETCH,
    DataloaderProfiling,
)
from trainprobe.capture.pytorch.profiling.dataloader_patch import WorkerChannel
from trainprobe.capture.pytorch.profiling.timeline import (
    BACKWARD,
    DATA_LOADING,
    FORWARD,
    OPTIMIZER,
    OPTIMIZER_CLOSURE,
    StepRecord,
    StepTimeline,
    Wait,
)
from trainprobe.capture.pytorch.profiling.trace_thread import TraceThread
from trainprobe.config.profiler_config import ProfilingPlan
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.trace_file import TimelineEvent, TraceFileWriter

__all__ = ["PHASE_ORDER", "PROFILER_PHASE", "TimelineRecorder"]

PROFILER_PHASE = "trainprobe"
"""The phase of the profiler's own slow work (writing profiles) in the timeline."""

PHASE_ORDER = (
    *(mode.step_phase for mode in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)),
    ModeKeys.GLOBAL.step_phase,
    DATA_LOADING,
    FORWARD,
    BACKWARD,
    OPTIMIZER,
    OPTIMIZER_CLOSURE,
    ITERATOR_INITIALIZE,
    ITERATOR_GET_NEXT,
    WORKER_FETCH,
    PROFILER_PHASE,
)
"""How the timeline's phases are ordered in a viewer: steps first."""


class TimelineRecorder:
    """Turns the profiler's moments into timeline events and writes them on a thread."""

    def __init__(
        self,
        out_dir: str,
        node_id: str,
        start_time_us: float,
        pid: int,
        off: set[str],
        fail: Callable[[str, BaseException], None],
        worker_timings_wanted: Callable[[], bool],
    ) -> None:
        self.out_dir = out_dir
        self.node_id = node_id
        self.start_time_us = start_time_us
        self.recording = False
        self.spent_seconds = 0.0
        self.timeline = StepTimeline(self.emit, pid)
        self.dataloader = DataloaderProfiling(self.emit, pid)
        self._off = off
        self._fail = fail
        self._worker_timings_wanted = worker_timings_wanted
        self._trace: TraceThread | None = None

    def refresh(self, active: bool, plan: ProfilingPlan) -> None:
        """Record from now on if ``active`` (starting the thread at first); else pause."""
        if active and "timeline" not in self._off and self._trace is None:
            try:
                settings = plan.trace_files
                writer = TraceFileWriter(
                    self.out_dir,
                    self.node_id,
                    start_time_us=self.start_time_us,
                    max_file_size=settings.file_max_size,
                    close_interval=settings.file_close_interval,
                    open_fail_threshold=settings.file_open_fail_threshold,
                    phase_order=PHASE_ORDER,
                )
                self._trace = TraceThread(writer, functools.partial(self._fail, "timeline"))
            except Exception as error:
                self._fail("timeline", error)
        self.recording = active and "timeline" not in self._off and self._trace is not None

    def configure(self, plan: ProfilingPlan) -> None:
        """Use ``plan``'s MetricsRegex and file rotation from now on."""
        self.dataloader.configure(plan.dataloader_metrics_regex)
        if self._trace is not None:
            settings = plan.trace_files
            self._trace.configure(
                max_file_size=settings.file_max_size, close_interval=settings.file_close_interval
            )

    def emit(self, event: TimelineEvent) -> None:
        """Queue one event (times in microseconds since the epoch)."""
        trace = self._trace
        if self.recording and trace is not None:
            trace.emit(event)

    # ----- the step -----

    def step_started(
        self,
        step: int,
        mode: ModeKeys,
        mode_step: int,
        model: str,
        start_us: float,
        entry_us: float,
        dataloader: bool,
        dataloader_done: bool,
    ) -> None:
        """A step began at ``start_us``; the one before ended by ``entry_us``.

        ``dataloader``: data loader profiling covers it; ``dataloader_done``: no later step is.
        """
        if start_us - entry_us > 1000.0:
            args = {"pid": self.timeline.pid}
            duration_us = start_us - entry_us
            self.emit(TimelineEvent(PROFILER_PHASE, "write profiles", entry_us, duration_us, args))
        previous = self.timeline.current
        placed = self.timeline.step_started(
            step, mode, mode_step, model, start_us, entry_us, dataloader
        )
        self._place(previous, placed, dataloader_done)

    def finish(self) -> None:
        """Write the last step, and what data loader profiling still holds."""
        if self.recording:
            previous = self.timeline.current
            placed = self.timeline.finish()
            self._place(previous, placed, True)
        try:
            self.dataloader.close()
        except Exception as error:
            self._fail("dataloader", error)

    def _place(
        self, previous: StepRecord | None, placed: list[tuple[Wait, StepRecord]], done: bool
    ) -> None:
        if "dataloader" in self._off:
            return
        try:
            data = self.dataloader
            if previous is not None:
                data.step_finished(previous)
            current = self.timeline.current
            if current is not None:
                data.step_started(current)
            data.steps_placed(placed)
            data.drain()
            if done and data.has_channels:
                data.close()  # the workers can stop reporting
        except Exception as error:
            self._fail("dataloader", error)

    # ----- the DataLoader (dataloader_patch.LoaderListener) -----

    @property
    def wants_worker_timings(self) -> bool:
        """Whether new DataLoader iterators should report their workers' fetch times."""
        return self.recording and "dataloader" not in self._off and self._worker_timings_wanted()

    def batch_fetched(self, iterator: Any, start_us: float, end_us: float) -> None:
        """The training waited for a batch of ``iterator``."""
        if self.recording:
            started = time.perf_counter()
            settings = self.dataloader.settings_of(iterator)
            self.timeline.batch_fetched(Wait(start_us, end_us, type(iterator).__name__, settings))
            self.spent_seconds += time.perf_counter() - started

    def iterator_created(
        self,
        loader: Any,
        iterator: Any,
        start_us: float,
        end_us: float,
        channel: WorkerChannel | None,
    ) -> None:
        """A DataLoader started an iterator (an epoch)."""
        try:
            if self.recording:
                self.dataloader.iterator_created(loader, iterator, start_us, end_us, channel)
            elif channel is not None:
                channel.close()
        except Exception as error:
            self._fail("dataloader", error)

    # ----- the end -----

    def pause(self) -> None:
        """Stop recording and finish the open file (framework profiling was disabled)."""
        self.recording = False
        if self._trace is not None:
            self._trace.finish_file()

    def close(self) -> None:
        """Stop recording, write what is queued and stop the thread."""
        self.recording = False
        if self._trace is not None:
            self._trace.close()
