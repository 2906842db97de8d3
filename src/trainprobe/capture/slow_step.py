"""The flight recorder's slow-step trigger: a step much slower than the recent steps of its mode.

StepOutlier's semantics, judged inside the training step by step instead of by a rule over a
window: a step is slow when it lasts more than ``factor`` times the median of the last
``window`` steps of its mode (TRAIN steps against TRAIN steps, EVAL against EVAL), and at least
``least_excess`` seconds more than that median, so that a hiccup of a millisecond on a very short
step does not count. The first ``warmup`` steps of each mode (compilation, allocator and autotuner
warm-up) are not judged and do not count towards the median, and judging starts once
``least_steps`` steps have been seen after them. The default factor is StepOutlier's ``stddev``
default in the catalogue (StepOutlier judges by the mean and standard deviation over a window; a
step at a time, the median is the measure that one stall does not move).

``judge`` runs on the training thread at every step: an append and a comparison; the median is
recomputed only every ``refresh`` steps (it moves slowly). No torch here: the durations are the
host's clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from statistics import median

from trainprobe.config import catalogue
from trainprobe.config.errors import ConfigError

__all__ = ["SlowStep", "SlowSteps", "default_factor"]


def default_factor() -> float:
    """k, the multiple of the median that makes a step slow: StepOutlier's ``stddev`` default."""
    return float(catalogue.get("StepOutlier").defaults()["stddev"])  # type: ignore[arg-type]


@dataclass(frozen=True)
class SlowStep:
    """A step judged slow: how long it took against the median of its mode's recent steps."""

    duration_s: float
    median_s: float
    threshold_s: float


@dataclass
class _ModeSteps:
    durations: deque[float]
    seen: int = 0
    threshold: float = float("inf")
    median: float = 0.0
    until_refresh: int = 0
    ready_after: int = field(default=0)


class SlowSteps:
    """Judges each step's duration against its mode's recent steps (see the module docstring)."""

    def __init__(
        self,
        factor: float | None = None,
        *,
        window: int = 50,
        warmup: int = 5,
        refresh: int = 5,
        least_steps: int = 10,
        least_excess: float = 0.05,
    ) -> None:
        factor = default_factor() if factor is None else factor
        if not factor > 1:
            raise ConfigError("factor", factor, "a multiple of the median greater than 1")
        if window < 2:
            raise ConfigError("window", window, "at least 2 steps")
        self.factor = factor
        self.window = window
        self.warmup = warmup
        self.refresh = max(1, refresh)
        self.least_steps = min(least_steps, window)
        self.least_excess = least_excess
        self._modes: dict[object, _ModeSteps] = {}

    def judge(self, mode: object, duration: float) -> SlowStep | None:
        """Add a step of ``mode`` that took ``duration`` seconds; a SlowStep when it was slow.

        A slow step does not join the median: one stall does not raise the bar for the next.
        """
        steps = self._modes.get(mode)
        if steps is None:
            steps = self._modes[mode] = _ModeSteps(deque(maxlen=self.window))
            steps.ready_after = self.warmup + self.least_steps
        steps.seen += 1
        if steps.seen <= self.warmup:
            return None
        if duration > steps.threshold:
            return SlowStep(duration, steps.median, steps.threshold)
        steps.durations.append(duration)
        steps.until_refresh -= 1
        if steps.until_refresh <= 0 and steps.seen >= steps.ready_after:
            steps.until_refresh = self.refresh
            steps.median = median(steps.durations)
            steps.threshold = max(self.factor * steps.median, steps.median + self.least_excess)
        return None
