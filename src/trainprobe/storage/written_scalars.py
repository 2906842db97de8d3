"""The scalars a worker wrote, kept beside its step files as chunks (``storage.scalar_chunks``)
so that a reader gets a long job's curves without decoding every step's files::

    <out_dir>/scalars/<worker>/<first:012>-<last:012>.chunk

A worker's writer thread hands ``ScalarChunkWriter`` each one-element numeric tensor it writes
(reductions aside: they are not tensors of their own to a reader) and each step whose files it
has written; every ``CHUNK_STEPS`` global steps, and when it closes, the steps since the last
chunk become a chunk. Until then the chunk so far is kept as a piece, written again every
``PIECE_STEPS`` steps or ``PIECE_SECONDS`` (each replacing the one before), so that a reader of
a live job decodes at most a few steps' files; the chunk, once written, replaces the last piece
(a reader takes whichever reaches further).

The hook also hands the writer every TRAIN step's record (``storage.training_record``: its
loss, learning rate and gradient norm), for steps whose files it writes and steps it saves
nothing of alike, each once the step has ended and its files (if any) were handed over before
it: a chunk covers the steps up to the last written or recorded.

A chunk lists the steps whose files the worker wrote: for a job of several workers,
``read_written_scalars`` keeps the steps every worker wrote (the trial's complete steps) and,
for each, the value of the first worker that holds it (as the trial does); the record's steps
need no file, and each is taken from the first worker that recorded it. A writer's chunks
start where the worker's earlier chunks end (step 0 for a new output): a step no chunk covers is
read from the step files.

Keeping chunks is a convenience: when a chunk cannot be written, the writer logs it once and
keeps no more, and the step files are unaffected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

from trainprobe.storage import files, locations
from trainprobe.storage.collections_file import read_collections_file
from trainprobe.storage.reduction_names import REDUCTION_PREFIX
from trainprobe.storage.scalar_chunks import (
    ScalarChunk,
    Steps,
    Values,
    chunk_path,
    chunk_spans,
    follow_chunks,
    read_spans,
    write_scalar_chunk,
)
from trainprobe.storage.step_reader import list_collections_files
from trainprobe.storage.training_record import RECORDED, TrainingRecord, is_recorded, record_of

__all__ = ["CHUNK_STEPS", "ScalarChunkWriter", "read_training_record", "read_written_scalars"]

log = logging.getLogger(__name__)

CHUNK_STEPS = 1000
"""Global steps a chunk of the writer covers (the last chunk, written at the end, fewer)."""
PIECE_STEPS = 100
PIECE_SECONDS = 2.0
"""Until its chunk is whole, the writer keeps the chunk so far as a piece, written again every
``PIECE_STEPS`` steps or ``PIECE_SECONDS`` seconds, whichever comes first; each piece replaces
the one before, and the whole chunk the last."""

_NUMBERS = frozenset("biuf")


class ScalarChunkWriter:
    """Keeps one worker's scalars as chunks under ``out_dir`` (see the module docstring). Used
    from one thread (the writer thread)."""

    def __init__(self, out_dir: str, worker: str) -> None:
        self.directory = locations.join(out_dir, locations.scalar_chunks_dir(worker))
        self._first: int | None = None  # the first step of the chunk being filled, once known
        self._kept_through = -1  # the last step in a file (a chunk or a piece)
        self._covered_through = -1  # the last step written or recorded
        # Values and written steps not yet in a file (a batch of values a step), then those
        # of the chunk being filled (arrays by tensor and mode).
        self._batches: list[tuple[int, str, tuple[str, ...], Values]] = []
        self._written: list[int] = []
        self._parts: dict[tuple[str, str], list[tuple[Steps, Values]]] = {}
        self._written_parts: list[Steps] = []
        self._pieces: list[str] = []
        self._layouts: dict[tuple[tuple[str, ...], tuple[str, ...]], _KeptValues] = {}
        self._kept_at = time.monotonic()
        self._on = True
        self._records_follow = False  # the hook hands over a record of each TRAIN step

    def add(self, step: int, mode: str, name: str, array: np.ndarray) -> None:
        """Tensor ``name`` was written at global ``step`` as ``array`` (kept when it is one
        number)."""
        if array.size == 1 and array.dtype.kind in _NUMBERS:
            self._keep(step, mode, (name,), np.asarray(array, np.float64).reshape(1))

    def add_scalars(
        self, step: int, mode: str, names: Sequence[str], dtypes: Sequence[str], values: np.ndarray
    ) -> None:
        """``StepWriter.add_scalars``'s tensors (each value as its dtype holds it)."""
        if not self._on:
            return
        key = (tuple(names), tuple(dtypes))
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = _KeptValues(*key)
        if not layout.names:
            return
        try:
            found = layout.values(values)
        except (TypeError, ValueError) as error:
            self.stop(f"a value of step {step} is no number: {error}", warn=True)
            return
        self._keep(step, mode, layout.names, found)

    def _keep(self, step: int, mode: str, names: tuple[str, ...], values: Values) -> None:
        if not self._on:
            return
        if step <= self._kept_through:
            self._written_again(step)
            return
        self._batches.append((step, mode, names, values))

    def add_record(self, step: int, mode: str, values: Values) -> int:
        """The training record of global ``step`` (``training_record.RECORDED``'s values, in
        that order): kept like a written step's values, and the step counts as covered (a piece
        or a chunk may be written: its bytes returned). A step's record reaches the writer after
        its files, when a piece may already hold them: it goes into the next piece or the chunk.
        Once records come, the files of a chunk's last step no longer make the chunk whole: its
        record does (or the next step, for a step without one)."""
        first = self._first_step() if self._on else None
        if first is None or step < first:
            return 0
        self._records_follow = True
        self._batches.append((step, mode, RECORDED, values))
        return self._covered(step, first)

    def step_written(self, step: int) -> int:
        """The files of global ``step`` are on disk: a piece or a chunk is written when enough
        steps or time have passed (its bytes returned)."""
        first = self._first_step() if self._on else None
        if first is None:
            return 0
        if step <= self._kept_through:
            self._written_again(step)
            return 0
        self._written.append(step)
        return self._covered(step, first, whole=not self._records_follow)

    def _covered(self, step: int, first: int, *, whole: bool = True) -> int:
        """Every value of the steps up to ``step`` is in hand (``whole``: the step's record
        too): a piece or a chunk is written when enough steps or time have passed (its bytes
        returned)."""
        self._covered_through = max(self._covered_through, step)
        last = first + CHUNK_STEPS - 1
        if self._covered_through > last or (whole and self._covered_through == last):
            return self.flush(through=last)
        if (
            self._covered_through - self._kept_through >= PIECE_STEPS
            or time.monotonic() - self._kept_at >= PIECE_SECONDS
        ):
            path, size = self._write(first)  # the chunk so far, in place of the last piece
            if path is not None:
                self._remove([piece for piece in self._pieces if piece != path])
                self._pieces = [path]
            return size
        return 0

    def flush(self, through: int | None = None) -> int:
        """Keep the steps written since the last chunk (up to ``through``, a chunk's last step:
        those after it wait for the next chunk) as a chunk, in place of their pieces, when there
        are any (its bytes returned). Values of a step whose files are not written yet wait."""
        first = self._first_step() if self._on else None
        if first is None or self._covered_through < first:
            return 0
        last = self._covered_through if through is None else min(through, self._covered_through)
        path, size = self._write(first, last)
        if path is None:
            return 0
        self._remove([piece for piece in self._pieces if piece != path])
        self._pieces.clear()
        self._parts.clear()
        self._written_parts.clear()
        self._first = last + 1
        return size

    def _write(self, start: int, last: int | None = None) -> tuple[str | None, int]:
        """Write the steps from ``start`` to ``last`` (the last covered) as a chunk file: its
        path (None when it failed) and size."""
        if last is None:
            last = self._covered_through
        self._take(last)
        series: dict[tuple[str, str], tuple[Steps, Values]] = {}
        for key, parts in self._parts.items():
            steps = np.concatenate([part[0] for part in parts])
            values = np.concatenate([part[1] for part in parts])
            if np.any(steps[1:] < steps[:-1]):
                order = np.argsort(steps, kind="stable")
                steps, values = steps[order], values[order]
            begin, end = np.searchsorted(steps, [start, last + 1])
            if end > begin:
                series[key] = (steps[begin:end], values[begin:end])
        written = np.unique(np.concatenate(self._written_parts))
        chunk = ScalarChunk(start, last, series, written[written >= start])
        try:
            size = write_scalar_chunk(self.directory, chunk)
        except Exception as error:
            self.stop(f"cannot write a chunk in {self.directory}: {error}", warn=True)
            return None, 0
        self._kept_through = last
        self._kept_at = time.monotonic()
        return chunk_path(self.directory, start, last), size

    def _take(self, last: int) -> None:
        """Turn the values and written steps up to ``last`` into arrays of the chunk being
        filled: the batches of the same tensors stacked, a column a tensor."""
        taken = [batch for batch in self._batches if batch[0] <= last]
        self._batches = [batch for batch in self._batches if batch[0] > last]
        stacks: dict[tuple[str, tuple[str, ...]], tuple[list[int], list[Values]]] = {}
        for step, mode, names, values in taken:
            stack = stacks.setdefault((mode, names), ([], []))
            stack[0].append(step)
            stack[1].append(values)
        for (mode, names), (steps, rows) in stacks.items():
            columns = np.stack(rows)
            at = np.asarray(steps, np.int64)
            for index, name in enumerate(names):
                self._parts.setdefault((name, mode), []).append((at, columns[:, index]))
        self._written_parts.append(np.asarray([s for s in self._written if s <= last], np.int64))
        self._written = [step for step in self._written if step > last]

    def _first_step(self) -> int | None:
        if self._first is None:
            try:
                spans = follow_chunks(chunk_spans(self.directory))
            except Exception as error:
                self.stop(f"cannot list {self.directory}: {error}", warn=True)
                return None
            self._first = spans[-1][1] + 1 if spans else 0
            self._kept_through = self._first - 1
        return self._first

    def _written_again(self, step: int) -> None:
        """A step already kept in a chunk is being written again: the chunks from that step on
        no longer hold its files' values, so they go, and no more are kept."""
        self.stop(f"step {step} was written again after its chunk")
        try:
            spans = chunk_spans(self.directory)
        except Exception as error:
            log.warning("trainprobe: cannot list %s: %s", self.directory, error)
            return
        self._remove([path for _, last, path in spans if last >= step])

    def _remove(self, paths: Sequence[str]) -> None:
        for path in paths:
            try:
                files.remove(path)
            except Exception as error:
                log.warning("trainprobe: cannot remove %s: %s", path, error)

    def stop(self, why: str, *, warn: bool = False) -> None:
        """Keep no more chunks (those written stay: they are whole)."""
        self._on = False
        for held in (self._batches, self._written, self._parts, self._written_parts):
            held.clear()
        (log.warning if warn else log.info)(
            "trainprobe: the scalars are no longer kept as chunks (%s); the step files hold "
            "them all",
            why,
        )


class _KeptValues:
    """Which values of a batch of scalars (``StepWriter.add_scalars``'s names and dtypes) are
    kept, and how each is converted: worked out once for batches named alike."""

    def __init__(self, names: tuple[str, ...], dtypes: tuple[str, ...]) -> None:
        kept = [index for index, name in enumerate(names) if not name.startswith(REDUCTION_PREFIX)]
        self.names = tuple(names[index] for index in kept)
        groups: dict[str, tuple[list[int], list[int]]] = {}
        for place, index in enumerate(kept):
            group = groups.setdefault(dtypes[index], ([], []))
            group[0].append(index)
            group[1].append(place)
        self._groups = [
            (dtype, np.asarray(sources), np.asarray(places))
            for dtype, (sources, places) in groups.items()
        ]

    def values(self, values: np.ndarray) -> Values:
        """The kept values of a batch, each as its dtype holds it, as float64."""
        found = np.empty(len(self.names), np.float64)
        for dtype, sources, places in self._groups:
            found[places] = values[sources].astype(dtype)
        return found


def read_written_scalars(out_dir: str, beyond: int = -1) -> ScalarChunk | None:
    """The scalars the workers of the output ``out_dir`` kept as chunks, from step 0 to the last
    step every worker's chunks cover, as one chunk; None when there are none (an output from
    smdebug or an older trainprobe, or a worker that kept none), or when they end at step
    ``beyond`` or before (told from the listing alone)."""
    spans = _spans_by_worker(out_dir)
    if not spans or min((found[-1][1] if found else -1) for found in spans.values()) <= beyond:
        return None
    workers = sorted(spans)
    chunks = {worker: read_spans(spans[worker]) for worker in workers}
    last = min((found[-1].last if found else -1) for found in chunks.values())
    if last < 0:
        return None
    by_key: dict[tuple[str, str], list[tuple[Steps, Values, int]]] = {}
    for rank, worker in enumerate(workers):
        for chunk in chunks[worker]:
            for key, (steps, values) in chunk.series.items():
                kept = steps <= last
                by_key.setdefault(key, []).append((steps[kept], values[kept], rank))
    # One worker's values are at steps it wrote, already in order.
    complete = _written_by_all(chunks, workers, last) if len(workers) > 1 else None
    series = {
        key: _first_worker_values(parts, None if is_recorded(key[0]) else complete)
        for key, parts in by_key.items()
    }
    return ScalarChunk(0, last, {key: found for key, found in series.items() if found[0].size})


def read_training_record(out_dir: str) -> TrainingRecord | None:
    """Every step's record the workers of the tensor output ``out_dir`` kept
    (``storage.training_record``), from step 0 to the last step their chunks cover; None when
    there is none."""
    written = read_written_scalars(out_dir)
    return None if written is None else record_of(written)


def _spans_by_worker(out_dir: str) -> dict[str, list[tuple[int, int, str]]]:
    """Each worker's chunks that follow each other from step 0; none unless every worker the
    collections files count kept some."""
    root = locations.join(out_dir, locations.SCALARS_DIR)
    workers = files.child_names(root)
    if not workers or len(workers) < _num_workers(out_dir):
        return {}
    return {worker: follow_chunks(chunk_spans(locations.join(root, worker))) for worker in workers}


def _num_workers(out_dir: str) -> int:
    counts = [1]
    for path in list_collections_files(out_dir):
        try:
            counts.append(read_collections_file(out_dir, path).num_workers)
        except (OSError, ValueError):
            continue
    return max(counts)


def _written_by_all(
    chunks: dict[str, list[ScalarChunk]], workers: Sequence[str], last: int
) -> Steps:
    """The steps up to ``last`` whose files every one of ``workers`` wrote."""
    complete: Steps | None = None
    for worker in workers:
        written = [chunk.written for chunk in chunks[worker] if chunk.written is not None]
        steps = np.concatenate(written) if written else np.empty(0, np.int64)
        steps = steps[steps <= last]
        complete = steps if complete is None else np.intersect1d(complete, steps)
    assert complete is not None  # there is a worker
    return complete


def _first_worker_values(
    parts: list[tuple[Steps, Values, int]], complete: Steps | None
) -> tuple[Steps, Values]:
    """One value a step, the first worker's, at the ``complete`` steps only (None: all)."""
    steps = np.concatenate([part[0] for part in parts])
    values = np.concatenate([part[1] for part in parts])
    if complete is None and bool(np.all(steps[1:] > steps[:-1])):
        return steps, values
    ranks = np.concatenate([np.full(part[0].size, part[2]) for part in parts])
    if complete is not None:
        kept = np.isin(steps, complete)
        steps, values, ranks = steps[kept], values[kept], ranks[kept]
    order = np.lexsort((ranks, steps))
    steps, values = steps[order], values[order]
    first = np.ones(steps.size, dtype=bool)
    first[1:] = steps[1:] != steps[:-1]
    return steps[first], values[first]
