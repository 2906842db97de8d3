"""Every scalar a job saved, by step and mode, as numpy arrays that grow as the job goes on.

Plotting a loss over 100 000 steps needs all 100 000 values; reading them means reading every
step's files, which takes minutes on a long job. ``ScalarSeries`` reads each step once: it
follows a trial (``follow`` reads only the steps after those it has), and when given a
directory it keeps what it read there as chunk files (``storage.scalar_chunks``), so that the
next reader (another process, a restarted UI) starts from them and reads only the steps after.
A job written by trainprobe's hook comes with such chunks (``storage.written_scalars``): then
even the first reader decodes only the steps its writers have not kept yet.
The values are exactly the trial's (``float`` of each one-element value), never resampled.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.scalar_chunks import (
    ScalarChunk,
    Steps,
    Values,
    chunk_spans,
    follow_chunks,
    read_spans,
    write_scalar_chunk,
)
from trainprobe.storage.written_scalars import read_written_scalars

__all__ = ["SAVE_EVERY", "ScalarSeries"]

log = logging.getLogger(__name__)

SAVE_EVERY = 1000
"""Steps read and not yet kept after which a chunk is written (and when the job has ended)."""
_BATCH = 4096
"""Steps read and decoded together (this bounds the memory one batch takes)."""

_NUMBERS = frozenset("biuf")


class _Series:
    """One tensor's values in one mode: arrays in parts, joined when read."""

    def __init__(self) -> None:
        self._parts: list[tuple[Steps, Values]] = []

    def extend(self, steps: Steps, values: Values) -> None:
        if steps.size:
            self._parts.append((steps, values))

    def arrays(self) -> tuple[Steps, Values]:
        if not self._parts:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        if len(self._parts) > 1:
            steps = np.concatenate([steps for steps, _ in self._parts])
            values = np.concatenate([values for _, values in self._parts])
            self._parts = [(steps, values)]
        return self._parts[0]


class ScalarSeries:
    """The scalars of one tensor output by step (see the module docstring).

    ``directory``, when given, is where the chunks are kept: those there are read at once.
    ``output``, when given, is the tensor output the series is of: the chunks its writers kept
    (``storage.written_scalars``) are read first when they reach further, and ``directory``'s
    only for the steps after them.
    """

    def __init__(self, directory: str | None = None, output: str | None = None) -> None:
        self.directory = directory
        self.read_through = -1
        """The last global step read (-1 before any): later steps are read from the trial."""
        self._saved_through = -1
        self._series: dict[str, dict[str, _Series]] = {}
        listed = chunk_spans(directory) if directory is not None else []
        kept = follow_chunks(listed)
        if output is not None:
            try:
                written = read_written_scalars(output, beyond=kept[-1][1] if kept else -1)
                if written is not None:
                    self._take(written)
            except Exception as error:  # the steps' files still hold every value
                log.warning("trainprobe: cannot read the scalars kept in %s: %s", output, error)
        start = self.read_through + 1
        for chunk in read_spans(follow_chunks(listed, start), start):
            self._take(chunk)

    def _take(self, chunk: ScalarChunk) -> None:
        self._add(chunk.series)
        self.read_through = self._saved_through = chunk.last

    def names(self) -> list[str]:
        """The tensors with a value read, in the order they were first met."""
        return list(self._series)

    def of(self, name: str) -> dict[str, tuple[Steps, Values]]:
        """Tensor ``name``'s (steps, values) by mode name (``"TRAIN"``), steps in order."""
        return {mode: series.arrays() for mode, series in self._series.get(name, {}).items()}

    def follow(self, trial: Trial, names: Sequence[str]) -> None:
        """Read the values of tensors ``names`` at each complete step of ``trial`` after
        ``read_through``: many steps at a time (``Trial.values_at_steps``). Only one-element
        numeric values count (a scalar); then a chunk is kept when enough are new."""
        steps = trial.steps()
        new = steps[bisect.bisect_right(steps, self.read_through) :]
        for start in range(0, len(new), _BATCH):
            found: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
            batch = new[start : start + _BATCH]
            for step, values_at in trial.values_at_steps(batch, names).items():
                mode = (trial.mode(step) or ModeKeys.GLOBAL).name
                for name, value in values_at.items():
                    if value.size == 1 and value.dtype.kind in _NUMBERS:
                        lists = found.setdefault((name, mode), ([], []))
                        lists[0].append(step)
                        lists[1].append(float(value.reshape(-1)[0]))
            self._add(
                {
                    key: (np.asarray(steps, np.int64), np.asarray(values, np.float64))
                    for key, (steps, values) in found.items()
                }
            )
            self.read_through = new[min(start + _BATCH, len(new)) - 1]
        if self.read_through - self._saved_through >= SAVE_EVERY or (
            trial.loaded_all_steps and self.read_through > self._saved_through
        ):
            self.save()

    def _add(self, series: dict[tuple[str, str], tuple[Steps, Values]]) -> None:
        for (name, mode), (steps, values) in series.items():
            self._series.setdefault(name, {}).setdefault(mode, _Series()).extend(steps, values)

    def save(self) -> None:
        """Keep the steps read since the last chunk as a new chunk (when there is a directory
        and something new)."""
        if self.directory is None or self.read_through <= self._saved_through:
            return
        first = self._saved_through + 1
        kept: dict[tuple[str, str], tuple[Steps, Values]] = {}
        for name, modes in self._series.items():
            for mode, series in modes.items():
                steps, values = series.arrays()
                at = int(np.searchsorted(steps, first))
                if at < steps.size:
                    kept[(name, mode)] = (steps[at:], values[at:])
        try:
            write_scalar_chunk(self.directory, ScalarChunk(first, self.read_through, kept))
        except OSError as error:
            log.warning(
                "trainprobe: cannot keep scalars in %s, not kept: %s", self.directory, error
            )
            self.directory = None
            return
        self._saved_through = self.read_through
