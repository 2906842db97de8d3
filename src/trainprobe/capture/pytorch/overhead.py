"""What the hook costs the training: its own time per step and the bytes it wrote.

The time is measured on the thread that called the hook (the training thread, or the autograd
thread that ran a gradient hook) around every hook entry; the writer thread's time is not in it,
since it runs beside the training. A step's time runs from the start of its forward to the start
of the next step's forward, so it includes finishing the step (handing its buffers over).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HookOverhead"]


@dataclass
class HookOverhead:
    """The hook's seconds per global step, and the bytes its writer has written so far."""

    seconds_by_step: dict[int, float] = field(default_factory=dict)
    _bytes: Callable[[], int] = field(default=lambda: 0, repr=False)
    blocked_seconds: Callable[[], float] = field(default=lambda: 0.0, repr=False)

    def add(self, step: int, seconds: float) -> None:
        """Count ``seconds`` of hook time against ``step``."""
        self.seconds_by_step[step] = self.seconds_by_step.get(step, 0.0) + seconds

    @property
    def total_seconds(self) -> float:
        """The hook's time over all steps."""
        return sum(self.seconds_by_step.values())

    @property
    def steps(self) -> int:
        """How many steps the hook has seen."""
        return len(self.seconds_by_step)

    @property
    def mean_seconds_per_step(self) -> float:
        """The hook's average time per step (0 before the first step)."""
        return self.total_seconds / self.steps if self.steps else 0.0

    @property
    def bytes_written(self) -> int:
        """Bytes of every file the hook has written so far."""
        return self._bytes()

    def to_dict(self) -> dict[str, Any]:
        """A summary fit for a report: totals plus the seconds of each step."""
        return {
            "steps": self.steps,
            "total_seconds": self.total_seconds,
            "mean_seconds_per_step": self.mean_seconds_per_step,
            "bytes_written": self.bytes_written,
            "blocked_seconds": self.blocked_seconds(),
            "seconds_by_step": dict(self.seconds_by_step),
        }
