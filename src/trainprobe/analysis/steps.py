"""Which steps a trial has seen: their modes, the workers that wrote them, and completeness.

Steps on disk are global steps; each also has a mode (TRAIN, EVAL, PREDICT or GLOBAL) and a
step number within that mode. A step is complete once every expected worker has written it,
once a later step is complete (the missing workers skipped it), or once the job has ended.
"""

from __future__ import annotations

from bisect import bisect_left
from enum import Enum

from trainprobe.storage.modes import ModeKeys

__all__ = ["StepCatalog", "StepState"]


class StepState(Enum):
    """What a trial knows about a step (smdebug's names and numbers)."""

    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2


class StepCatalog:
    """The steps seen so far, by global step and by (mode, mode step)."""

    def __init__(self) -> None:
        self.num_workers = 1
        self.ended = False
        self.last_complete_step = -1
        self._global_to_mode: dict[int, tuple[ModeKeys, int]] = {}
        self._mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        self._workers: dict[int, set[str]] = {}
        self._sorted: dict[ModeKeys, list[int]] = {}

    def add(self, step: int, worker: str, mode: ModeKeys, mode_step: int) -> None:
        """Record that ``worker`` wrote global ``step`` in ``mode`` at ``mode_step``."""
        if step not in self._global_to_mode:
            self._global_to_mode[step] = (mode, mode_step)
            self._sorted.clear()
        if mode != ModeKeys.GLOBAL:
            mode_steps = self._mode_to_global.setdefault(mode, {})
            if mode_step not in mode_steps:
                mode_steps[mode_step] = step
                self._sorted.clear()
        workers = self._workers.setdefault(step, set())
        workers.add(worker)
        if len(workers) >= self.num_workers and step > self.last_complete_step:
            self.last_complete_step = step

    def set_num_workers(self, num_workers: int) -> None:
        """The number of workers expected to write each step (from the collections files)."""
        self.num_workers = max(1, num_workers)
        for step, workers in self._workers.items():
            if len(workers) >= self.num_workers and step > self.last_complete_step:
                self.last_complete_step = step

    def mark_ended(self) -> None:
        """The job has ended: every step seen is complete, and no more will come."""
        self.ended = True
        if self._global_to_mode:
            self.last_complete_step = max(self.last_complete_step, max(self._global_to_mode))

    def workers(self, step: int) -> set[str]:
        """The workers that wrote global ``step`` (empty when none did)."""
        return self._workers.get(step, set())

    def is_complete(self, step: int) -> bool:
        """Whether global ``step`` has been written by everyone who will write it."""
        return (
            self.ended
            or step <= self.last_complete_step
            or len(self._workers.get(step, ())) >= self.num_workers
        )

    def to_global(self, mode: ModeKeys, step: int) -> int | None:
        """The global step of ``step`` counted in ``mode``, or None when it is not known."""
        if mode == ModeKeys.GLOBAL:
            return step if step in self._global_to_mode else None
        return self._mode_to_global.get(mode, {}).get(step)

    def mode_of(self, step: int) -> tuple[ModeKeys, int] | None:
        """(mode, mode step) of global ``step``, or None when it is not known."""
        return self._global_to_mode.get(step)

    def modes(self) -> list[ModeKeys]:
        """The modes seen, GLOBAL excepted."""
        return sorted(self._mode_to_global)

    def steps(self, mode: ModeKeys = ModeKeys.GLOBAL, *, incomplete: bool = False) -> list[int]:
        """Steps seen, sorted: global steps for GLOBAL, else the mode's own step numbers."""
        if mode not in self._sorted:
            if mode == ModeKeys.GLOBAL:
                self._sorted[mode] = sorted(self._global_to_mode)
            else:
                self._sorted[mode] = sorted(self._mode_to_global.get(mode, {}))
        everything = self._sorted[mode]
        if incomplete:
            return list(everything)
        if mode == ModeKeys.GLOBAL:
            return [step for step in everything if self.is_complete(step)]
        to_global = self._mode_to_global.get(mode, {})
        return [step for step in everything if self.is_complete(to_global[step])]

    def state(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> StepState:
        """Whether ``step`` (of ``mode``) is complete, will never come, or may still come."""
        seen = self.steps(mode, incomplete=True)
        position = bisect_left(seen, step)
        if position < len(seen):
            found = seen[position]
            global_step = self.to_global(mode, found)
            assert global_step is not None
            if found == step:
                complete = self.is_complete(global_step)
                return StepState.AVAILABLE if complete else StepState.NOT_YET_AVAILABLE
            # A later step exists: if it is complete, this one was skipped for good.
            if self.is_complete(global_step):
                return StepState.UNAVAILABLE
            return StepState.NOT_YET_AVAILABLE
        return StepState.UNAVAILABLE if self.ended else StepState.NOT_YET_AVAILABLE
