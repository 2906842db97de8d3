"""When a value is a spike: a two-sided z-score against a rolling window of the values before it.

The judgement of ``LossSpike`` and ``GradientNormSpike``, the same in the training process (the
hook judges every step) and after it (the rule judges the saved losses). Pure Python, no
framework: a value is

- always a spike when it is not finite (and it does not enter the window);
- never a spike while the window holds fewer than ``warmup`` values;
- a spike when it lies more than ``sigma`` deviations from the window's mean, either side, or
  (with ``ratio`` > 0) above ``ratio`` times the window's mean.

A spike does not enter the window, so a run of spikes is judged against the healthy values
before it. Mean and deviation are kept as running sums: judging is O(1) in the window's size.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

__all__ = ["SpikeSettings", "SpikeVerdict", "SpikeWindow"]


@dataclass(frozen=True)
class SpikeSettings:
    """The rule's parameters (see the catalogue, where their defaults are: ``LossSpike``,
    ``GradientNormSpike``)."""

    window: int
    sigma: float
    warmup: int
    ratio: float

    @classmethod
    def of(cls, parameters: Mapping[str, object]) -> SpikeSettings:
        """The settings among a spike rule's effective parameters (the catalogue's names)."""
        return cls(
            window=int(cast(int, parameters["window"])),
            sigma=float(cast(float, parameters["sigma"])),
            warmup=int(cast(int, parameters["warmup_steps"])),
            ratio=float(cast(float, parameters["ratio"])),
        )


@dataclass(frozen=True)
class SpikeVerdict:
    """A judged value: whether it is a spike, and the window it was judged against."""

    spike: bool
    mean: float | None
    std: float | None
    z: float | None


class SpikeWindow:
    """The last ``settings.window`` healthy values of one series, and the judgement of the next."""

    def __init__(self, settings: SpikeSettings) -> None:
        self.settings = settings
        self._values: deque[float] = deque()
        self._sum = 0.0
        self._squares = 0.0

    def judge(self, value: float) -> SpikeVerdict:
        """Judge ``value`` against the window; a healthy value then enters it."""
        if not math.isfinite(value):
            return SpikeVerdict(True, *self._mean_std(), None)
        mean, std = self._mean_std()
        if mean is None or std is None:
            self._add(value)
            return SpikeVerdict(False, None, None, None)
        # A window of equal values has no deviation: a relative floor keeps z finite.
        std = max(std, 1e-6 * abs(mean), 1e-12)
        z = (value - mean) / std
        ratio = self.settings.ratio
        spike = abs(z) > self.settings.sigma or (ratio > 0 and value > ratio * mean)
        if not spike:
            self._add(value)
        return SpikeVerdict(spike, mean, std, z)

    def _mean_std(self) -> tuple[float | None, float | None]:
        count = len(self._values)
        if count < max(self.settings.warmup, 2):
            return None, None
        mean = self._sum / count
        variance = max(0.0, self._squares / count - mean * mean)
        return mean, math.sqrt(variance)

    def _add(self, value: float) -> None:
        self._values.append(value)
        self._sum += value
        self._squares += value * value
        if len(self._values) > self.settings.window:
            old = self._values.popleft()
            self._sum -= old
            self._squares -= old * old
