"""The phases of a training job (``ModeKeys``), numbered as smdebug numbers them.

The number is what goes on disk (inside each tensor record), so the values must never change:
TRAIN=1, EVAL=2, PREDICT=3, GLOBAL=4. GLOBAL means "no particular mode": a step counted across
all modes.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ModeKeys"]


class ModeKeys(IntEnum):
    """The mode a step was taken in; the hook re-exports it as ``modes``."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4
