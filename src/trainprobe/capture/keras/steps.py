"""The Keras hook's steps, counted from the training itself.

- A TRAIN step is one update of the optimizer: the optimizer's ``iterations`` counts them, and
  TRAIN step N is the training's N-th update counted from 0 (a model trained before starts where
  its optimizer is). With gradient accumulation (``gradient_accumulation_steps=k``) an update
  takes k batches, and the batches in between are no step. With ``steps_per_execution=N`` Keras
  calls back once every N batches: the hook sees the updates of those N batches at once, names
  the step by the last of them, and saves it if any of them is due.
- An EVAL step (validation in ``fit``, ``evaluate``) and a PREDICT step (``predict``) is one
  batch (one execution of ``steps_per_execution`` batches); each mode counts its own steps, as
  smdebug counts them, across every evaluation.
- The global step counts every step of every mode (the first is 0).

The counts come from the batch indices Keras passes and from the optimizer's own micro-batch
count, read where the training's state is synced (the start of ``fit`` and of each epoch, the end
of an epoch's training batches), never a value read back from the device per batch.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from trainprobe.storage.modes import ModeKeys

__all__ = ["Point", "TrainingSteps"]

_REMEMBERED = 4096
"""How many recent TRAIN steps keep their global step (for records read later)."""


@dataclass(frozen=True)
class Point:
    """A step that has just ended: its global step, mode and mode step; for TRAIN the first
    update it covers (``first``); ``last`` when it ends an epoch's training or an evaluation."""

    step: int
    mode: ModeKeys
    mode_step: int
    first: int
    last: bool


class TrainingSteps:
    """The global step and the mode steps of a Keras training (see the module docstring)."""

    def __init__(self) -> None:
        self.step = -1
        self.mode_steps = dict.fromkeys(ModeKeys, -1)
        self.training_open = False
        self._run_open = False
        self._accumulation = 1
        self._updates = 0
        self._epoch_start = 0
        self._done = 0
        self._global_of: OrderedDict[int, int] = OrderedDict()

    def mode_step(self, mode: ModeKeys) -> int:
        """The last step of ``mode`` so far (-1 before its first)."""
        return self.mode_steps[mode]

    def begin_fit(self, micro_batches: int, accumulation: int) -> None:
        """``fit`` starts; the optimizer has run ``micro_batches`` batches so far."""
        self._accumulation = max(int(accumulation), 1)
        self._updates = micro_batches // self._accumulation
        self._done = micro_batches
        self.mode_steps[ModeKeys.TRAIN] = max(self.mode_steps[ModeKeys.TRAIN], self._updates - 1)

    def begin_epoch(self, micro_batches: int) -> None:
        """An epoch starts, after ``micro_batches`` batches in all."""
        self._epoch_start = self._done = micro_batches
        self.training_open = False

    def coming_train_steps(self, batches: int) -> range:
        """The TRAIN steps whose updates the next ``batches`` batches may complete; from now on
        training batches are running."""
        self.training_open = True
        k = self._accumulation
        return range(self._done // k, (self._done + batches) // k)

    def train_batches_done(
        self, batch: int | None, micro_batches: int | None = None
    ) -> Point | None:
        """The training batches before batch ``batch`` of the epoch have run (or, with
        ``micro_batches``, the optimizer's exact count: the epoch's training ended). The TRAIN
        step they completed, or None when they completed no update."""
        last_of_epoch = batch is None
        done = micro_batches if micro_batches is not None else self._epoch_start + (batch or 0)
        self.training_open = False
        self._done = done
        updates = done // self._accumulation
        if updates <= self._updates:
            return None
        first, self._updates = self._updates, updates
        self.step += 1
        self.mode_steps[ModeKeys.TRAIN] = updates - 1
        for update in range(max(first, updates - _REMEMBERED), updates):
            self._global_of[update] = self.step
        while len(self._global_of) > _REMEMBERED:
            self._global_of.popitem(last=False)
        return Point(self.step, ModeKeys.TRAIN, updates - 1, first, last_of_epoch)

    def global_step(self, update: int) -> int | None:
        """The global step of TRAIN step ``update`` (None when it is not among the recent)."""
        return self._global_of.get(update)

    def end_fit(self) -> None:
        """``fit`` ended."""
        self.training_open = False

    def begin_run(self, mode: ModeKeys) -> None:
        """``fit``, an evaluation or a prediction starts."""
        self._run_open = False

    def batch_started(self) -> None:
        """An EVAL or PREDICT batch starts."""
        self._run_open = True

    def batch_done(self, mode: ModeKeys, *, last: bool = False) -> Point | None:
        """An EVAL or PREDICT batch (execution) ended: its step (None if none ran)."""
        if not self._run_open:
            return None
        self._run_open = not last
        self.step += 1
        self.mode_steps[mode] += 1
        step = self.mode_steps[mode]
        return Point(self.step, mode, step, step, last)

    def end_run(self) -> None:
        """The evaluation or prediction ended."""
        self._run_open = False
