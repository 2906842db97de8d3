"""Saving one step of a Keras training: what is due, copied to the host, handed to the writer.

A step is saved when it has ended (at the start of the next one, or at the end of its epoch or
evaluation), while the training's state is there to read: the save plan says which collections
are due at it (with ``steps_per_execution`` a step stands for several updates: due if any of
them is), the values those collections may hold are copied to the host (``values.host_copy``:
the writer writes them while the training goes on changing the variables), and each becomes the
records its plan asks for (raw, shape, reductions computed on the writer thread).
``save_scalar`` and ``save_tensor`` values wait here for the next saved step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from trainprobe.capture.collections import CollectionKeys
from trainprobe.capture.keras import naming
from trainprobe.capture.keras.hook_output import HookOutput
from trainprobe.capture.keras.steps import Point
from trainprobe.capture.keras.tapped_models import TappedModels
from trainprobe.capture.keras.training_state import TrainingState
from trainprobe.capture.keras.values import Reduction, host_copy
from trainprobe.capture.save_plan import SavePlan
from trainprobe.capture.writer_thread import EndStep, ShapeRecord, TensorRecord
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.reduction_names import reduction_tensor_name

__all__ = ["AT_THE_END", "StepSaver"]

log = logging.getLogger("trainprobe")

AT_THE_END = (CollectionKeys.LOSSES, CollectionKeys.METRICS)
"""Saved at the last step of an epoch and of an evaluation, whatever their interval."""

_LOOK_BACK = 64
"""With ``steps_per_execution``, how many of the updates a step stands for are looked at."""


class StepSaver:
    """Saves the steps of the hook's models (see the module docstring)."""

    def __init__(
        self,
        plan: SavePlan,
        output: HookOutput,
        tapped: TappedModels,
        training: TrainingState,
        *,
        dry_run: bool,
    ) -> None:
        self.plan = plan
        self.output = output
        self.tapped = tapped
        self.training = training
        self.dry_run = dry_run
        self.pending_scalars: dict[str, np.ndarray] = {}
        self.pending_tensors: dict[str, np.ndarray] = {}

    def due(self, point: Point) -> int:
        """The collections due at ``point``, as a mask over the plan's saved collections."""
        due = 0
        for mode_step in range(
            max(point.first, point.mode_step - _LOOK_BACK + 1), point.mode_step + 1
        ):
            due |= self.plan.due(point.mode, mode_step)
        if point.last and point.mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            due |= self.mask_of(AT_THE_END)
        if not due and self.pending_scalars and point.last:
            due = self.mask_of((CollectionKeys.SM_METRICS,))
        return due

    def mask_of(self, names: Iterable[str]) -> int:
        """The mask of the saved collections among ``names``."""
        wanted = set(names)
        return sum(1 << i for i, c in enumerate(self.plan.saved) if c.name in wanted)

    def save(self, point: Point, model: Any, due: int, *, full: bool = False) -> None:
        """Save ``due`` collections of ``model`` at ``point`` (``full``: and every value the
        hook can take, raw, whatever the plan says)."""
        if not (due or full):
            return
        if self.dry_run:
            names = ", ".join(c.name for c in self.plan.collections_in(due))
            log.info("trainprobe dry run: step %d would save %s", point.step, names)
            return
        self.training.sync()
        scalars, self.pending_scalars = self.pending_scalars, {}
        sent = self._send(point, due, self._values(point, model, due, full), full)
        sent = self._send_scalars(point, scalars) or sent
        if sent:
            self.output.writer.submit(EndStep(point.step))
            self.output.step_written()

    def _values(
        self, point: Point, model: Any, due: int, full: bool
    ) -> list[tuple[str, np.ndarray]]:
        """The values of the tensors the due collections may hold (``full``: all), as host
        copies."""
        found: list[tuple[str, np.ndarray]] = []
        if point.mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            found += self._loss_values(model, point)
        weights = list(naming.model_variables(model))
        if full or self.plan.holds_any([name for name, _, _ in weights], due):
            found += [(name, host_copy(variable)) for name, _, variable in weights]
        if point.mode is ModeKeys.TRAIN:
            found += self.tapped.gradient_values(model)
            variables = self.tapped.optimizer_variables()
            names = [naming.optimizer_variable_name(v) for v in variables]
            if full or self.plan.holds_any(names, due):
                found += [(n, host_copy(v)) for n, v in zip(names, variables, strict=True)]
        tensors, self.pending_tensors = self.pending_tensors, {}
        return found + list(tensors.items())

    def _loss_values(self, model: Any, point: Point) -> list[tuple[str, np.ndarray]]:
        found: list[tuple[str, np.ndarray]] = []
        taps = self.tapped.taps_of(model)
        if taps is not None and taps.has_loss:
            last, total, count = taps.loss_values()
            accumulated = point.mode is ModeKeys.TRAIN and self.training.accumulation(model) > 1
            loss = taps.loss_of(last, total, count, accumulated)
            found.append((naming.BATCH_LOSS, np.asarray(loss, dtype=np.float32)))
        for key, value in model.get_metrics_result().items():
            array = host_copy(value)
            if array.size == 1:
                found.append((str(key), array.reshape(())))
        return found

    def _send(
        self, point: Point, due: int, values: list[tuple[str, np.ndarray]], full: bool
    ) -> bool:
        writer = self.output.writer
        export = writer.tensorboard is not None
        wall_time = time.time()
        sent = False
        for name, value in values:
            plan = self.plan.what_to_save(name, due)
            if not (plan.anything or full):
                continue
            summary = plan.summary if export else None
            if plan.raw or full or summary is not None:
                writer.submit(
                    TensorRecord(
                        point.step, name, value, point.mode, point.mode_step, wall_time,
                        summary=summary, save_raw=plan.raw or full,
                    )
                )  # fmt: skip
            if plan.shape:
                writer.submit(
                    ShapeRecord(point.step, name, tuple(value.shape), point.mode, point.mode_step)
                )
            for op, of_abs in plan.reductions:
                writer.submit(
                    TensorRecord(
                        point.step, reduction_tensor_name(op, name, of_abs),
                        Reduction(value, op, of_abs), point.mode, point.mode_step, wall_time,
                    )
                )  # fmt: skip
            sent = True
        return sent

    def _send_scalars(self, point: Point, scalars: dict[str, np.ndarray]) -> bool:
        """``save_scalar`` values: written at the next saved step, whatever its collections."""
        writer = self.output.writer
        wall_time = time.time()
        for name, value in scalars.items():
            writer.submit(
                TensorRecord(point.step, name, value, point.mode, point.mode_step, wall_time)
            )
        return bool(scalars)
