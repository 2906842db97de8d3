"""The phases of a training job (``ModeKeys``), numbered as smdebug numbers them.

The number is what goes on disk (inside each tensor record), so the values must never change:
TRAIN=1, EVAL=2, PREDICT=3, GLOBAL=4. GLOBAL means "no particular mode": a step counted across
all modes.

A step is named to people as the training counts it, by ``step_in_words`` (and a run of steps by
``step_span_in_words``): the mode's own step first, the global step after it, ``TRAIN step 10
(step 20)``. The global step counts every step of every mode (an evaluation batch too), so it is
rarely the number a script prints; the mode's step is. Every verdict, status, report and page
names steps through these two functions.
"""

from __future__ import annotations

from enum import IntEnum

from trainprobe.config.errors import ConfigError

__all__ = ["STEP_PHASE_PREFIX", "ModeKeys", "step_in_words", "step_span_in_words"]

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


def step_in_words(step: int, mode: ModeKeys | None = None, mode_step: int | None = None) -> str:
    """Global ``step`` as the training counts it: ``TRAIN step 10 (step 20)``; ``TRAIN step 10``
    where the two counts agree; ``step 20`` for a GLOBAL step or one whose mode is not known."""
    if mode is None or mode == ModeKeys.GLOBAL or mode_step is None:
        return f"step {step}"
    if mode_step == step:
        return f"{mode.name} step {mode_step}"
    return f"{mode.name} step {mode_step} (step {step})"


def step_span_in_words(
    first: int,
    last: int,
    mode: ModeKeys | None = None,
    first_mode_step: int | None = None,
    last_mode_step: int | None = None,
) -> str:
    """Global steps ``first`` to ``last`` of one mode, as ``step_in_words`` names one step:
    ``EVAL steps 4-7 (steps 24-27)``; a single step when ``first == last``."""
    if first == last:
        return step_in_words(first, mode, first_mode_step)
    span = f"steps {first}-{last}"
    if mode is None or mode == ModeKeys.GLOBAL or first_mode_step is None or last_mode_step is None:
        return span
    if (first_mode_step, last_mode_step) == (first, last):
        return f"{mode.name} {span}"
    return f"{mode.name} steps {first_mode_step}-{last_mode_step} ({span})"
