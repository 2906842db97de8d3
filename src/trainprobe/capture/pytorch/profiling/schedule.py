"""When a profiling option runs, decided step by step: its step range or its time range.

A ``ProfilingPlan`` gives each option a ``StepWindow`` or a ``TimeWindow``; what those leave open
is settled when the plan is read (at the start, or when a live update arrives): a missing start
step means the next step, a missing start time means now. Steps are global steps (every forward of
the model counts, whatever the mode), as smdebug counts them for profiling.

Options switch on and off at step starts only: a step is profiled when it is in the step range,
or when it starts inside the time range ``[start, start + duration)``. A time range without a
duration profiles one step, the first to start at or after its start.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainprobe.config.metrics_config import StepWindow, TimeWindow
from trainprobe.config.profiler_config import ProfilingPlan

__all__ = ["OptionSchedule", "Schedules"]


class OptionSchedule:
    """Which steps one option profiles."""

    def __init__(
        self, window: StepWindow | TimeWindow | None, first_step: int, read_at: float
    ) -> None:
        self.window = window
        self.first_step = first_step
        self.read_at = read_at
        self._single_step: int | None = None

    def covers(self, step: int, step_start: float) -> bool:
        """Whether the step ``step``, starting at ``step_start`` (Unix seconds), is profiled."""
        window = self.window
        if window is None:
            return False
        if isinstance(window, StepWindow):
            return window.covers(step, self.first_step)
        start = self.read_at if window.start_unix_time is None else float(window.start_unix_time)
        if window.duration is not None:
            return start <= step_start < start + window.duration
        if self._single_step is None and step_start >= start:
            self._single_step = step
        return step == self._single_step

    def finished(self, step: int, now: float) -> bool:
        """Whether no step from ``step`` on (starting ``now`` or later) can be profiled."""
        window = self.window
        if window is None:
            return True
        if isinstance(window, StepWindow):
            first = self.first_step if window.start_step is None else window.start_step
            return step >= first + window.num_steps
        if window.duration is None:
            return self._single_step is not None and step > self._single_step
        start = self.read_at if window.start_unix_time is None else float(window.start_unix_time)
        return now >= start + window.duration


@dataclass
class Schedules:
    """The schedules of the three options a plan can turn on."""

    detailed: OptionSchedule
    dataloader: OptionSchedule
    python: OptionSchedule

    @classmethod
    def of(cls, plan: ProfilingPlan, first_step: int, read_at: float) -> Schedules:
        """The schedules of ``plan``, read before step ``first_step`` at ``read_at`` (Unix s)."""
        return cls(
            OptionSchedule(plan.detailed, first_step, read_at),
            OptionSchedule(plan.dataloader, first_step, read_at),
            OptionSchedule(plan.python, first_step, read_at),
        )
