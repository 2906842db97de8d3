"""The training record as scalars of a trial: ``trainprobe/loss``, ``trainprobe/learning_rate``
and ``trainprobe/gradient_norm`` at every TRAIN step, whatever the save interval.

No step file holds them: the hook keeps them in its scalar chunks (``storage.training_record``).
A ``RecordedTensor`` answers as any scalar of the trial does, by global step or by the step of
its mode (``value(5, mode=ModeKeys.TRAIN)`` is the loss of the sixth update), from the record
the trial last read; its steps are the recorded ones, not the trial's saved ones. Values are 0-d
float64 arrays; a step whose loss the hook did not find has NaN.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from trainprobe.analysis.exceptions import (
    InvalidWorker,
    NoMoreData,
    ShapeUnavailableForStep,
    StepNotYetAvailable,
    TensorUnavailableForStep,
)
from trainprobe.analysis.read_log import ReadLog
from trainprobe.analysis.reductions import canonical_reduction, compute_reduction
from trainprobe.analysis.tensor import Tensor, TensorSource
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.training_record import TrainingRecord

__all__ = ["RecordSource", "RecordedTensor"]


class RecordSource(TensorSource, Protocol):
    """What a recorded tensor reads through its trial: the training record, and the workers;
    what it reads is told to the trial's ``read_log`` (a rule's coverage), when there is one."""

    read_log: ReadLog | None

    def _training_record(self) -> TrainingRecord | None:
        """The training record as last read; None when there is none."""
        ...

    def workers(self) -> list[str]:
        """The trial's workers."""
        ...


class RecordedTensor(Tensor):
    """One series of the training record, read as a scalar tensor (see the module docstring)."""

    def __init__(self, name: str, trial: RecordSource) -> None:
        super().__init__(name, trial)
        self._source = trial

    def _record(self) -> TrainingRecord | None:
        return self._source._training_record()

    def _read(self) -> None:
        log = self._source.read_log
        if log is not None:
            log.read(self.name)

    def _steps_of(self, record: TrainingRecord, mode: ModeKeys) -> np.ndarray | None:
        """The record's steps counted in ``mode`` (None: it holds no step of that mode)."""
        if mode == ModeKeys.GLOBAL:
            return record.steps
        if mode.name == record.mode:
            return record.mode_steps
        return None

    def steps(
        self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False
    ) -> list[int]:
        """The recorded steps: global steps, or those of ``mode`` (TRAIN) counted in it."""
        record = self._record()
        steps = None if record is None else self._steps_of(record, mode)
        return [] if steps is None else [int(step) for step in steps]

    def _index(self, step_num: int, mode: ModeKeys) -> tuple[TrainingRecord, int]:
        record = self._record()
        steps = None if record is None else self._steps_of(record, mode)
        if record is not None and steps is not None:
            at = int(np.searchsorted(steps, step_num))
            if at < steps.size and int(steps[at]) == step_num:
                return record, at
            if at == steps.size and steps.size:
                if not self._trial.loaded_all_steps:
                    raise StepNotYetAvailable(step_num, mode)
                raise NoMoreData(step_num, mode, int(steps[-1]))
        raise TensorUnavailableForStep(self.name, step_num, mode)

    def _check_worker(self, worker: str | None) -> None:
        known = self._source.workers()[:1]
        if worker is not None and worker not in known:
            raise InvalidWorker(worker, known)

    def workers(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
        """The worker whose record is read (the first)."""
        self._index(step_num, mode)
        return self._source.workers()[:1]

    def value(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> np.ndarray:
        """The recorded value at ``step_num`` (of ``mode``), a 0-d float64 array."""
        self._check_worker(worker)
        record, at = self._index(step_num, mode)
        self._read()
        return np.asarray(record.values[self.name][at], dtype=np.float64)

    def values(
        self, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[int, np.ndarray]:
        """The recorded value at every recorded step (of ``mode``), by step."""
        self._check_worker(worker)
        record = self._record()
        steps = None if record is None else self._steps_of(record, mode)
        if record is None or steps is None:
            return {}
        found = record.values[self.name]
        self._read()
        return {
            int(step): np.asarray(value, dtype=np.float64)
            for step, value in zip(steps, found, strict=True)
        }

    def original_dtype(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> str:
        """float64: the record keeps its values as such."""
        self.value(step_num, mode, worker)
        return "float64"

    def shape(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> tuple[int, ...]:
        """``()``: a recorded value is one number."""
        try:
            self.value(step_num, mode, worker)
        except TensorUnavailableForStep:
            raise ShapeUnavailableForStep(self.name, step_num, mode) from None
        return ()

    def reduction_value(
        self,
        step_num: int,
        reduction_name: str,
        mode: ModeKeys = ModeKeys.GLOBAL,
        worker: str | None = None,
        abs: bool = False,
    ) -> np.ndarray:
        """A reduction of the recorded value (the value itself, or its magnitude)."""
        value = self.value(step_num, mode, worker)
        return compute_reduction(canonical_reduction(reduction_name), value, abs)

    def reduction_values(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[tuple[str, bool], np.ndarray]:
        """None saved: the record holds values only."""
        self.value(step_num, mode, worker)
        return {}
