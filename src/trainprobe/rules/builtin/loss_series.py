"""The values the loss rules judge: training losses, evaluation passes, and their smoothing.

A training loss is one value per saved TRAIN step (or GLOBAL step, for a script that never sets a
mode). An evaluation pass, the EVAL steps between two training steps, is one value: the mean of
the losses saved in it. Its batches are evaluated with the same weights, so they say nothing
about progress among themselves; only one pass against another, or against the training, does.
A pass is told from the next by what the global step counts besides EVAL steps: within a pass
the global step and the EVAL step advance together, so ``step - mode_step`` (the steps of other
modes before it) is the pass's own, whether or not the training steps between two passes were
saved. A pass is complete when a step of another pass or mode arrives, or the training ends.

One mini-batch's loss is noisy, so the rules smooth: a side of a comparison is a window, the
newest values that together average at least ``WINDOW`` saved losses (5 training steps; 5
single-batch evaluation passes, or one pass of 5 batches or more). ``LossSeries.windows`` finds
the two windows of a comparison, or says why there are none yet, and what would change that;
``noise_of`` how far apart their means may fall by the batches' noise alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from trainprobe.rules.builtin.base import number
from trainprobe.storage.modes import ModeKeys, step_span_in_words

__all__ = [
    "PASS_MODES",
    "WINDOW",
    "EvaluationPasses",
    "LossSeries",
    "LossValue",
    "Windows",
    "mean_of",
    "newest_window",
    "noise_of",
    "window_words",
]

WINDOW = 5
"""How many saved losses, at least, each side of a comparison averages."""

PASS_MODES = (ModeKeys.EVAL, ModeKeys.PREDICT)
"""Modes whose steps come in passes over fixed weights."""


@dataclass(frozen=True)
class LossValue:
    """One value of a loss: a training step's loss, or an evaluation pass's mean.

    ``losses`` are the saved losses it averages (one for a training step); ``first_*`` and
    ``last_*`` the global and mode steps of the first and last of them.
    """

    losses: tuple[float, ...]
    mode: ModeKeys
    first_step: int
    last_step: int
    first_mode_step: int
    last_mode_step: int

    @property
    def value(self) -> float:
        """The mean of its saved losses."""
        return float(np.mean(self.losses))

    @property
    def position(self) -> int:
        """Where it lies in its mode's own count of steps (the first of its steps)."""
        return self.first_mode_step

    @classmethod
    def at_step(cls, loss: float, mode: ModeKeys, step: int, mode_step: int) -> LossValue:
        """The value of a loss saved at one step."""
        return cls((loss,), mode, step, step, mode_step, mode_step)

    def words(self) -> str:
        """Its steps as the training counts them: ``TRAIN step 4 (step 5)``, ``EVAL steps
        0-9 (steps 20-29)``."""
        return step_span_in_words(
            self.first_step, self.last_step, self.mode, self.first_mode_step, self.last_mode_step
        )


def mean_of(window: Sequence[LossValue]) -> float:
    """A window's mean: each value (a step's loss, a pass's mean) counts once."""
    return float(np.mean([value.value for value in window]))


def noise_of(first: Sequence[LossValue], second: Sequence[LossValue]) -> float:
    """Two standard errors of the difference between two windows' means, from the spread of
    the saved losses each holds: how far apart the two may fall by the batches' noise alone
    (0 for windows of one loss each, as XGBoost's metrics are)."""
    variance = 0.0
    for window in (first, second):
        losses = np.array([loss for value in window for loss in value.losses])
        if losses.size > 1:
            variance += float(losses.var(ddof=1)) / losses.size
    return 2.0 * math.sqrt(variance)


def window_words(window: Sequence[LossValue], kept: str = "saved") -> str:
    """Where a window's mean comes from: ``0.31 (mean of 5 saved, TRAIN steps 0-4)``,
    ``2.1 (mean of 3 evaluation passes, EVAL steps 0-2 (steps 5-17))``, ``2.1 (evaluation pass,
    EVAL steps 0-49 (steps 100-149))``; ``kept`` says how its losses were kept (``recorded``:
    the hook's every-step record)."""
    first, last = window[0], window[-1]
    steps = step_span_in_words(
        first.first_step, last.last_step, first.mode, first.first_mode_step, last.last_mode_step
    )
    shown = number(mean_of(window))
    if first.mode in PASS_MODES:
        if len(window) == 1:
            batches = len(first.losses)
            return f"{shown} (evaluation pass of {batches} saved, {steps})"
        return f"{shown} (mean of {len(window)} evaluation passes, {steps})"
    if len(window) == 1:
        return f"{shown} at {steps}"
    return f"{shown} (mean of {len(window)} {kept}, {steps})"


def _held(values: Sequence[LossValue]) -> int:
    return sum(len(value.losses) for value in values)


def newest_window(
    values: Sequence[LossValue], end: int | None = None, least: int = WINDOW
) -> list[LossValue] | None:
    """The newest values up to index ``end`` (the last by default) that together average at
    least ``least`` saved losses; None when all of them hold fewer."""
    end = len(values) - 1 if end is None else end
    held = 0
    for start in range(end, -1, -1):
        held += len(values[start].losses)
        if held >= least:
            return list(values[start : end + 1])
    return None


@dataclass
class Windows:
    """The two sides of a comparison, or, when there are none yet, why (``waiting``)."""

    earlier: list[LossValue] | None = None
    recent: list[LossValue] | None = None
    waiting: str = ""


@dataclass
class LossSeries:
    """One loss's values of one kind (training steps, or evaluation passes), oldest first."""

    mode: ModeKeys
    least: int = WINDOW
    """How many saved losses each side of a comparison averages, at least (1 for XGBoost's
    metrics, each over a whole data set)."""
    values: list[LossValue] = field(default_factory=list)
    last_compared: int | None = None
    """The position of the newest value of the last comparison."""

    def add(self, value: LossValue) -> bool:
        """Add ``value``; False (and nothing added) when it is not newer than the last one."""
        if self.values and self.values[-1].position >= value.position:
            return False
        self.values.append(value)
        return True

    def forget_before(self, value: LossValue) -> None:
        """Drop the values before ``value``, the oldest of a comparison's windows: a later
        comparison's windows start no earlier, so a long training's series stays short."""
        self.values = self.values[self.values.index(value) :]

    @property
    def held(self) -> int:
        """How many saved losses its values average in all."""
        return _held(self.values)

    def windows(self, gap: int) -> Windows:
        """(earlier, recent): ``recent`` the newest values holding ``least`` saved losses,
        ``earlier`` the values before them holding as many, the newest of which lies at least
        ``gap`` steps (of this series' mode) before the newest value. Otherwise ``waiting``
        says what is missing, and what would change it."""
        values = self.values
        least = self.least
        recent = newest_window(values, least=least)
        needed = 2 * least
        if recent is not None and self.mode in PASS_MODES and len(recent) == len(values):
            return Windows(
                waiting=(
                    f"{self._held_words()} up to {values[-1].words()}: a pass is compared with "
                    f"the passes before it, each side averaging passes that hold {least} losses "
                    "or more: run longer (more evaluation passes)"
                )
            )
        if recent is None or _held(values) - _held(recent) < least:
            return Windows(
                waiting=(
                    f"{self._held_words()} up to {values[-1].words() if values else 'now'}, "
                    f"{needed} needed (each side of a comparison averages {least}): run "
                    "longer, or save the losses more often"
                )
            )
        newest = values[-1].position
        before = len(values) - len(recent) - 1
        while before >= 0 and values[before].position > newest - gap:
            before -= 1
        earlier = newest_window(values, before, least) if before >= 0 else None
        if earlier is None:
            unit = self._unit()
            what = (
                f"passes holding {least} losses" if self.mode in PASS_MODES else f"{least} losses"
            )
            closest = newest - values[len(values) - len(recent) - 1].position
            return Windows(
                waiting=(
                    f"{self._held_words()} up to {values[-1].words()}: the newest {what} are "
                    f"compared with the {what} before them, the newest of those at least "
                    f"num_steps {gap} {unit} before the newest; so far that gap is at most "
                    f"{closest} {unit}: run longer, or lower num_steps to {closest}"
                )
            )
        return Windows(earlier, recent)

    def _unit(self) -> str:
        if self.mode == ModeKeys.GLOBAL:
            return "steps"
        return f"{self.mode.name} steps"

    def _held_words(self) -> str:
        if self.mode in PASS_MODES:
            passes = len(self.values)
            return f"{passes} {self.mode.name} pass(es) holding {self.held} saved loss(es) in all"
        kind = "training" if self.mode == ModeKeys.TRAIN else "saved"
        return f"{self.held} {kind} loss(es)"


@dataclass
class _OpenPass:
    count: int
    """Steps of other modes before the pass: the same for every step of one pass."""
    losses: list[float] = field(default_factory=list)
    first: tuple[int, int] = (0, 0)
    last: tuple[int, int] = (0, 0)


class EvaluationPasses:
    """Gathers the losses of EVAL (and PREDICT) steps into passes, one loss at a time, and hands
    each pass back once it is complete."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, ModeKeys], _OpenPass] = {}

    def add(self, name: str, mode: ModeKeys, step: int, mode_step: int, loss: float) -> None:
        """Loss ``name`` = ``loss`` at ``step`` (``mode_step`` of ``mode``, one of PASS_MODES),
        in the pass that step belongs to."""
        count = step - mode_step
        found = self._open.get((name, mode))
        if found is None or found.count != count:
            found = self._open[name, mode] = _OpenPass(count, first=(step, mode_step))
        found.losses.append(loss)
        found.last = (step, mode_step)

    def complete_before(
        self, step: int, mode: ModeKeys | None, mode_step: int | None
    ) -> list[tuple[str, LossValue]]:
        """The passes that ``step`` (of ``mode``) shows complete: every open pass it is not a
        step of. They are handed back once, oldest first."""
        count = None if mode not in PASS_MODES or mode_step is None else step - mode_step
        done = [
            key
            for key, open_pass in self._open.items()
            if not (key[1] == mode and open_pass.count == count)
        ]
        return self._close(done)

    def complete_all(self) -> list[tuple[str, LossValue]]:
        """Every open pass, complete since the training ended."""
        return self._close(list(self._open))

    def open_passes(self) -> int:
        """How many passes are still open."""
        return len(self._open)

    def _close(self, keys: list[tuple[str, ModeKeys]]) -> list[tuple[str, LossValue]]:
        closed = []
        for key in keys:
            found = self._open.pop(key)
            value = LossValue(
                tuple(found.losses),
                key[1],
                found.first[0],
                found.last[0],
                found.first[1],
                found.last[1],
            )
            closed.append((key[0], value))
        return sorted(closed, key=lambda item: item[1].first_step)
