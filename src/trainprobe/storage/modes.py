"""The phases of a training job (``ModeKeys``), numbered as smdebug numbers them.

The number is what goes on disk (inside each tensor record), so the values must never change:
TRAIN=1, EVAL=2, PREDICT=3, GLOBAL=4. GLOBAL means "no particular mode": a step counted across
all modes.
"""

from __future__ import annotations

from enum import IntEnum

from trainprobe.config.errors import ConfigError

__all__ = ["STEP_PHASE_PREFIX", "ModeKeys"]

STEP_PHASE_PREFIX = "Step:ModeKeys."
"""How a step's event in the framework timeline is named: ``Step:ModeKeys.TRAIN``."""


class ModeKeys(IntEnum):
    """The mode a step was taken in; the hook re-exports it as ``modes``."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4

    @classmethod
    def parse(cls, mode: object, field: str = "mode") -> ModeKeys:
        """``mode`` as a ModeKeys: a ModeKeys, or its number; ConfigError naming ``field``
        otherwise (a bool is refused though Python counts it as a number)."""
        if isinstance(mode, ModeKeys):
            return mode
        if isinstance(mode, int) and not isinstance(mode, bool) and mode in set(cls):
            return cls(mode)
        names = ", ".join(f"modes.{m.name}" for m in cls)
        raise ConfigError(field, mode, f"one of {names}")

    @property
    def step_phase(self) -> str:
        """The phase (and name) of a step's event in the framework timeline."""
        return f"{STEP_PHASE_PREFIX}{self.name}"
