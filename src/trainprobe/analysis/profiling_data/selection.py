"""What part of a job a question is about: a time range or a step range, and a mode.

Times are microseconds since the epoch, ``start_us <= t < end_us``. Steps are global steps,
``start_step <= step < end_step`` (like ``range``); either end may be left open. A range is of
one kind: asking for both is an error, as is an end before its start.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from trainprobe.analysis.profiling_data.steps import StepSpan
from trainprobe.config.errors import ConfigError, closest
from trainprobe.storage.modes import ModeKeys

__all__ = ["Selection", "mode_name", "overlaps"]

_MODES = [mode.name for mode in ModeKeys]


def mode_name(mode: object, field: str = "mode") -> str | None:
    """``TRAIN``, ``EVAL``, ``PREDICT`` or ``GLOBAL`` for a ModeKeys or its name (any case)."""
    if mode is None:
        return None
    if isinstance(mode, ModeKeys):
        return mode.name
    if isinstance(mode, str) and mode.upper() in _MODES:
        return mode.upper()
    raise ConfigError(
        field,
        mode,
        f"a ModeKeys or one of {', '.join(_MODES)}",
        suggestion=closest(str(mode), _MODES) if isinstance(mode, str) else None,
    )


def overlaps(start_us: float, end_us: float, low_us: float, high_us: float) -> bool:
    """Whether ``[start_us, end_us)`` overlaps ``[low_us, high_us)``; a moment (an interval of
    no length) when it lies in it."""
    return start_us < high_us and (end_us > low_us or low_us <= start_us)


def _time(value: object, field: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
        return float(value)
    raise ConfigError(field, value, "a time in microseconds since the epoch, or None")


def _step(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    suggestion = None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        suggestion = str(int(value))
    raise ConfigError(
        field, value, "a step number (an integer >= 0), or None", suggestion=suggestion
    )


@dataclass(frozen=True)
class Selection:
    """A checked time or step range, with a mode (None: every mode)."""

    start_us: float = -math.inf
    end_us: float = math.inf
    start_step: int | None = None
    end_step: int | None = None
    mode: str | None = None

    @classmethod
    def of(
        cls,
        start_us: float | None = None,
        end_us: float | None = None,
        start_step: int | None = None,
        end_step: int | None = None,
        mode: ModeKeys | str | None = None,
    ) -> Selection:
        """The selection these arguments describe; ConfigError when they do not make one."""
        start = _time(start_us, "start_us", -math.inf)
        end = _time(end_us, "end_us", math.inf)
        first = _step(start_step, "start_step")
        last = _step(end_step, "end_step")
        by_time = start_us is not None or end_us is not None
        if by_time and (first is not None or last is not None):
            field = "start_step" if first is not None else "end_step"
            raise ConfigError(
                field,
                first if first is not None else last,
                "a time range (start_us, end_us) or a step range (start_step, end_step), not both",
            )
        if end < start:
            raise ConfigError("end_us", end_us, f"a time at or after start_us ({start_us})")
        if first is not None and last is not None and last < first:
            raise ConfigError("end_step", last, f"a step at or after start_step ({first})")
        return cls(start, end, first, last, mode_name(mode))

    @property
    def by_step(self) -> bool:
        """Whether this is a step range."""
        return self.start_step is not None or self.end_step is not None

    def holds_step(self, step: int | None, mode: str | None) -> bool:
        """Whether a step (of ``mode``) is selected; None steps only by an open step range."""
        if self.mode is not None and mode != self.mode:
            return False
        if not self.by_step:
            return True
        if step is None:
            return False
        return (self.start_step is None or step >= self.start_step) and (
            self.end_step is None or step < self.end_step
        )

    def holds_time(self, start_us: float, end_us: float | None = None) -> bool:
        """Whether a moment, or the interval to ``end_us``, overlaps the time range.

        Intervals are half-open: one that ends where the range starts is not in it.
        """
        return overlaps(
            start_us, start_us if end_us is None else end_us, self.start_us, self.end_us
        )

    def time_bounds(self, spans: Iterable[StepSpan]) -> tuple[float, float] | None:
        """The times to read: the time range, or the spans of the selected steps (None if none)."""
        if not self.by_step:
            return self.start_us, self.end_us
        chosen = [span for span in spans if self.holds_step(span.step, span.mode)]
        if not chosen:
            return None
        return min(s.wait_start_us for s in chosen), max(s.end_us for s in chosen)
