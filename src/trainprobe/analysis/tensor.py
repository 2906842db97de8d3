"""One tensor of a trial: the steps it was saved at, and its values, shapes and reductions.

Steps are global steps unless a ``mode`` is given, in which case they are that mode's own
step numbers (``value(3, mode=ModeKeys.EVAL)`` is the fourth EVAL step). Values are read from
disk when asked for, one record each; nothing is decoded before it is needed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np

from trainprobe.analysis.exceptions import (
    InvalidWorker,
    NoMoreData,
    ShapeUnavailableForStep,
    StepNotYetAvailable,
    StepUnavailable,
    TensorRecordDamaged,
    TensorUnavailableForStep,
)
from trainprobe.analysis.reductions import canonical_reduction, compute_reduction
from trainprobe.analysis.steps import StepCatalog, StepState
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.tensor_event import TensorEvent

__all__ = ["RecordRef", "Tensor", "TensorSource"]


class RecordRef(NamedTuple):
    """Where one saved record lies: event file (relative to the trial), start, length, and the
    checksum its index gives (None for output written without one)."""

    event_file: str
    start: int
    length: int
    checksum: int | None = None


@dataclass
class _Saved:
    """What one worker saved of a tensor at one step."""

    value: RecordRef | None = None
    shape: tuple[int, ...] | None = None
    reductions: dict[tuple[str, bool], RecordRef] = field(default_factory=dict)


class TensorSource(Protocol):
    """What a tensor reads through the trial that made it (``trainprobe.analysis.trial.Trial``):
    its steps, and the records it holds."""

    name: str
    loaded_all_steps: bool
    _catalog: StepCatalog

    def maybe_refresh(self) -> None:
        """Look for new steps, unless the trial has them all."""

    def steps(
        self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False
    ) -> list[int]:
        """The saved steps of ``mode``."""
        ...

    def _value(self, name: str, step: int, mode: ModeKeys, ref: RecordRef) -> np.ndarray:
        """The value in the record at ``ref``."""
        ...

    def _read(
        self, name: str, step: int, mode: ModeKeys, refs: Sequence[RecordRef]
    ) -> list[TensorEvent]:
        """The records at ``refs``, decoded, in order."""
        ...


class Tensor:
    """A tensor saved by the job, across steps and workers. Created by the trial."""

    def __init__(self, name: str, trial: TensorSource) -> None:
        self.name = name
        self.original_name: str | None = None
        self._trial = trial
        self._steps: dict[int, dict[str, _Saved]] = {}
        self._sorted: list[int] | None = None

    def __repr__(self) -> str:
        return f"<Tensor {self.name!r} of trial {self._trial.name!r}>"

    def _saved(self, step: int, worker: str) -> _Saved:
        workers = self._steps.get(step)
        if workers is None:
            workers = self._steps[step] = {}
            self._sorted = None
        saved = workers.get(worker)
        if saved is None:
            saved = workers[worker] = _Saved()
        return saved

    def _add_value(self, step: int, worker: str, ref: RecordRef) -> None:
        self._saved(step, worker).value = ref

    def _add_shape(self, step: int, worker: str, shape: tuple[int, ...], original: str) -> None:
        self._saved(step, worker).shape = shape
        self.original_name = original

    def _add_reduction(self, step: int, worker: str, op: str, is_abs: bool, ref: RecordRef) -> None:
        self._saved(step, worker).reductions[(op, is_abs)] = ref

    def _global_steps(self) -> list[int]:
        if self._sorted is None:
            self._sorted = sorted(self._steps)
        return self._sorted

    def steps(
        self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False
    ) -> list[int]:
        """The steps this tensor was saved at (complete steps only, unless asked).

        For GLOBAL these are global steps; for another mode, that mode's step numbers.
        """
        self._trial.maybe_refresh()
        catalog = self._trial._catalog
        result = []
        for step in self._global_steps():
            if not show_incomplete_steps and not catalog.is_complete(step):
                continue
            if mode == ModeKeys.GLOBAL:
                result.append(step)
                continue
            step_mode = catalog.mode_of(step)
            if step_mode is not None and step_mode[0] == mode:
                result.append(step_mode[1])
        if mode != ModeKeys.GLOBAL:
            result.sort()
        return result

    def prev_steps(
        self, step: int, n: int | None = None, mode: ModeKeys = ModeKeys.GLOBAL
    ) -> list[int]:
        """The (up to ``n``) saved steps up to and including ``step``, oldest first."""
        steps = self.steps(mode=mode)
        previous = steps[: bisect_right(steps, step)]
        return previous[-n:] if n else previous

    def _find(self, step: int, mode: ModeKeys) -> dict[str, _Saved] | None:
        global_step = self._trial._catalog.to_global(mode, step)
        if global_step is None and mode == ModeKeys.GLOBAL:
            global_step = step
        return None if global_step is None else self._steps.get(global_step)

    def _step_workers(self, step: int, mode: ModeKeys) -> dict[str, _Saved]:
        """What each worker saved at ``step``, refreshing once; raises when there is nothing."""
        found = self._find(step, mode)
        if found is None:
            self._trial.maybe_refresh()
            found = self._find(step, mode)
        if found is not None:
            return found
        state = self._trial._catalog.state(step, mode)
        if state == StepState.AVAILABLE:
            raise TensorUnavailableForStep(self.name, step, mode)
        if state == StepState.UNAVAILABLE:
            raise StepUnavailable(step, mode)
        if self._trial.loaded_all_steps:
            steps = self._trial.steps(mode)
            raise NoMoreData(step, mode, steps[-1] if steps else -1)
        raise StepNotYetAvailable(step, mode)

    def _at(self, step: int, mode: ModeKeys, worker: str | None) -> _Saved:
        workers = self._step_workers(step, mode)
        if worker is None:
            return workers[min(workers)]
        if worker not in workers:
            raise InvalidWorker(worker, sorted(workers))
        return workers[worker]

    def workers(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
        """The workers that saved this tensor at ``step_num``, sorted."""
        return sorted(self._step_workers(step_num, mode))

    def value(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> np.ndarray:
        """The tensor's value at ``step_num`` (from the first worker in sorted order by default).

        Raises TensorUnavailableForStep when only its reductions or shape were saved there,
        StepUnavailable / StepNotYetAvailable / NoMoreData when the step_num itself is missing,
        and InvalidWorker for a worker that did not write the step.
        """
        saved = self._at(step_num, mode, worker)
        if saved.value is None:
            raise TensorUnavailableForStep(self.name, step_num, mode, bool(saved.reductions))
        return self._trial._value(self.name, step_num, mode, saved.value)

    def values(
        self, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[int, np.ndarray]:
        """The tensor's value at every complete step where it was saved, by step.

        A step whose record is damaged is left out (the trial logs it once).
        """
        found: dict[int, np.ndarray] = {}
        for step in self.steps(mode=mode):
            saved = self._at(step, mode, worker)
            if saved.value is None:
                continue
            try:
                found[step] = self._trial._value(self.name, step, mode, saved.value)
            except TensorRecordDamaged:
                continue
        return found

    def original_dtype(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> str:
        """The dtype the tensor had in the framework (``"bfloat16"`` although saved as float32)."""
        saved = self._at(step_num, mode, worker)
        if saved.value is None:
            raise TensorUnavailableForStep(self.name, step_num, mode, bool(saved.reductions))
        event = self._trial._read(self.name, step_num, mode, [saved.value])[0]
        return event.original_dtype or event.value().dtype.name

    def shape(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> tuple[int, ...]:
        """The tensor's shape at ``step_num``: the saved shape, else that of its saved value."""
        saved = self._at(step_num, mode, worker)
        if saved.shape is not None:
            return saved.shape
        if saved.value is None:
            raise ShapeUnavailableForStep(self.name, step_num, mode)
        return tuple(self._trial._read(self.name, step_num, mode, [saved.value])[0].shape)

    def reduction_value(
        self,
        step_num: int,
        reduction_name: str,
        mode: ModeKeys = ModeKeys.GLOBAL,
        worker: str | None = None,
        abs: bool = False,
    ) -> np.ndarray:
        """Reduction ``reduction_name`` (of the absolute values when ``abs``) at ``step_num``.

        The saved reduction when there is one, else computed with numpy from the saved value.
        Norms are ``l1`` and ``l2``. Returned as a 0-d array.
        """
        op = canonical_reduction(reduction_name)
        saved = self._at(step_num, mode, worker)
        ref = saved.reductions.get((op, abs))
        if ref is not None:
            return self._trial._value(self.name, step_num, mode, ref)
        if saved.value is None:
            raise TensorUnavailableForStep(self.name, step_num, mode, bool(saved.reductions))
        raw = self._trial._value(self.name, step_num, mode, saved.value)
        return compute_reduction(op, raw, abs)

    def reduction_values(
        self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[tuple[str, bool], np.ndarray]:
        """Every reduction saved at ``step_num``, keyed by (name, abs)."""
        saved = self._at(step_num, mode, worker)
        keys = sorted(saved.reductions)
        refs = [saved.reductions[key] for key in keys]
        events = self._trial._read(self.name, step_num, mode, refs)
        return {key: event.value() for key, event in zip(keys, events, strict=True)}
