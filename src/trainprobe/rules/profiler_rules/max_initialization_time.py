"""MaxInitializationTime: a late first step.

It reads the step events of the framework timeline (``Step:ModeKeys.<MODE>``), so it needs
framework profiling; without it (``Window.framework_expected`` false) it does not judge. It fires
while no step has started more than ``threshold`` minutes after the job's first data, and in the
window where the first step starts that late. It also keeps the job's timing (first data, first
step, last step, end) that the report's job summary shows.
"""

from __future__ import annotations

from typing import Any

from trainprobe.analysis.profiling_data.steps import is_step_event
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.window import NO_FRAMEWORK_EVENTS, Window

__all__ = ["MaxInitializationTime"]


class MaxInitializationTime(WindowRule):
    """Fires when the first step takes too long to arrive."""

    rule_name = "MaxInitializationTime"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.job_start_us: float | None = None
        self.first_step_us: float | None = None
        self.last_step_end_us: float | None = None
        self.steps = 0
        self.scanned_until_us: float | None = None
        self.job_end_us: float | None = None
        self.framework_expected = True

    def evaluate_window(self, window: Window) -> bool:
        self.framework_expected = window.framework_expected
        self.job_start_us = window.job_start_us
        self.scanned_until_us = window.end_us
        had_step = self.first_step_us is not None
        for event in window.framework:
            if not is_step_event(event):
                continue
            self.steps += 1
            if self.first_step_us is None or event.start_us < self.first_step_us:
                self.first_step_us = event.start_us
            if self.last_step_end_us is None or event.end_us > self.last_step_end_us:
                self.last_step_end_us = event.end_us
        if window.final:
            self.job_end_us = window.end_us
        self.report.datapoints = self.steps
        self.report.details = self._details()
        limit_us = self.number("threshold") * 60e6
        if had_step or not self.framework_expected:
            return False
        waited_us = (self.first_step_us or window.end_us) - window.job_start_us
        if waited_us <= limit_us:
            return False
        self.report.violations += 1
        what = "no step yet" if self.first_step_us is None else "the first step"
        self.record(
            f"{what} after {waited_us / 60e6:.2f} minutes", waited_us / 60e6, self.threshold
        )
        return True

    @property
    def threshold(self) -> float:
        """The threshold in minutes."""
        return self.number("threshold")

    def _details(self) -> dict[str, Any]:
        def seconds(start: float | None, end: float | None) -> float | None:
            return None if start is None or end is None else (end - start) / 1e6

        return {
            "job_start_us": self.job_start_us,
            "first_step_start_us": self.first_step_us,
            "last_step_end_us": self.last_step_end_us,
            "job_end_us": self.job_end_us,
            "scanned_until_us": self.scanned_until_us,
            "steps": self.steps,
            "initialization_s": seconds(self.job_start_us, self.first_step_us),
            "training_s": seconds(self.first_step_us, self.last_step_end_us),
            "finalization_s": seconds(self.last_step_end_us, self.job_end_us),
        }

    def recommendation(self) -> str:
        if self.job_start_us is None:
            return "No data yet."
        if self.first_step_us is None:
            if not self.framework_expected:
                return NO_FRAMEWORK_EVENTS
            waited = ((self.scanned_until_us or self.job_start_us) - self.job_start_us) / 60e6
            verdict = "more than" if waited > self.threshold else "within"
            return (
                f"No step has started {waited:.1f} minutes into the job ({verdict} the "
                f"{self.threshold:g} minutes allowed)."
                + (_SPEED_UP if waited > self.threshold else "")
            )
        took = (self.first_step_us - self.job_start_us) / 60e6
        if took > self.threshold:
            return (
                f"The first step started {took:.1f} minutes after the job's first data (more than "
                f"the {self.threshold:g} minutes allowed): initialization is slow." + _SPEED_UP
            )
        return (
            f"The first step started {took * 60:.1f} s after the job's first data, within the "
            f"{self.threshold:g} minutes allowed."
        )


_SPEED_UP = (
    " Prepare or download the data ahead of the job, load it lazily, start DataLoader workers "
    "once (persistent_workers=True), and look for slow model or environment setup."
)
