"""A compact copy of scalars by step, so that a reader need not decode every step's files again:
chunk files of numbers, each for a run of global steps.

Two writers keep them: the hook's writer thread, beside the step files it writes
(``storage.written_scalars``), and a reader that has read a job's scalars (the UI). A chunk of
global steps ``first`` to ``last`` is one file::

    <directory>/<first:012>-<last:012>.chunk

    b"trainprobe-scalars 1\n", the head's length and the CRC32C of all that follows (uint32
    each), the head (JSON), then arrays, each at a multiple of 8 bytes: for each series its
    steps (int64; left out when an earlier series has the same) and its values (float32 when
    they all are float32 numbers, else float64), and the ``written`` steps (int64)

The head names each series ``[tensor, mode, the array of its steps, its values' dtype]`` and
gives each array's length. ``written``, in a chunk the hook wrote, lists the steps whose files
it wrote (what makes a step complete for a reader of several workers). The series of a chunk
mostly share their steps, and most values are float32 numbers: 50 scalars over 1 000 steps take
about 200 KB. A chunk is read in one go, its arrays taken as they lie in the file; a chunk whose
bytes changed is not read.

A reader follows chunks from a step on: each next chunk is the one reaching furthest among those
that start at or before the step after what it has (chunks written by two readers may overlap;
the steps already had are dropped). It stops at a gap or a damaged chunk, so what is read is
always a whole prefix, and the steps after it are read from the output itself. Chunks appear
atomically (``files.write_atomic``), locally or in object storage.
"""

from __future__ import annotations

import json
import logging
import re
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from trainprobe.storage import files, locations
from trainprobe.storage.tfrecord import crc32c

__all__ = [
    "ScalarChunk",
    "Steps",
    "Values",
    "chunk_path",
    "chunk_spans",
    "follow_chunks",
    "read_scalar_chunks",
    "read_spans",
    "write_scalar_chunk",
]

log = logging.getLogger(__name__)

_SUFFIX = ".chunk"
_NAME = re.compile(r"^(\d{12})-(\d{12})\.chunk$")
_MAGIC = b"trainprobe-scalars 1\n"
_HEAD = struct.Struct("<II")  # the head's length, the CRC32C of the rest
_STEPS, _VALUES, _NARROW = np.dtype("<i8"), np.dtype("<f8"), np.dtype("<f4")

Steps = npt.NDArray[np.int64]
Values = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ScalarChunk:
    """The scalars of global steps ``first`` to ``last`` (both included), by (tensor, mode).

    ``written``: the steps of the range whose files were written, when the writer knows it.
    """

    first: int
    last: int
    series: dict[tuple[str, str], tuple[Steps, Values]]
    written: Steps | None = field(default=None, compare=False)

    def after(self, step: int) -> ScalarChunk:
        """This chunk without the steps up to ``step``."""
        if step < self.first:
            return self
        series = {}
        for key, (steps, values) in self.series.items():
            at = int(np.searchsorted(steps, step, side="right"))
            if at < steps.size:
                series[key] = (steps[at:], values[at:])
        written = self.written
        if written is not None:
            written = written[int(np.searchsorted(written, step, side="right")) :]
        return ScalarChunk(step + 1, self.last, series, written)


def write_scalar_chunk(directory: str, chunk: ScalarChunk) -> int:
    """Write ``chunk`` into ``directory``; the bytes written."""
    arrays: list[np.ndarray] = []  # in file order, each at a multiple of 8 bytes
    shared: dict[tuple[int, int, int], list[tuple[int, Steps]]] = {}
    series = []
    for (tensor, mode), (steps, values) in chunk.series.items():
        steps = np.asarray(steps, dtype=_STEPS)
        values = np.asarray(values, dtype=_VALUES)
        steps_at = _shared_steps(shared, steps, len(arrays))
        if steps_at == len(arrays):
            arrays.append(steps)
        narrow = values.astype(_NARROW)
        # float32 values (most losses and metrics) are kept as such, exactly
        kept = narrow if np.array_equal(narrow.astype(_VALUES), values, equal_nan=True) else values
        series.append([tensor, mode, steps_at, kept.dtype.str])
        arrays.append(kept)
    written = None if chunk.written is None else np.asarray(chunk.written, dtype=_STEPS)
    if written is not None:
        arrays.append(written)
    head = json.dumps(
        {
            "first": chunk.first,
            "last": chunk.last,
            "series": series,
            "sizes": [int(array.size) for array in arrays],
            "written": written is not None,
        }
    ).encode()
    parts: list[bytes] = [head]
    end = len(_MAGIC) + _HEAD.size + len(head)
    for array in arrays:
        parts += [bytes(-end % 8), array.tobytes()]
        end += -end % 8 + array.nbytes
    rest = b"".join(parts)
    data = _MAGIC + _HEAD.pack(len(head), crc32c(rest)) + rest
    return files.write_atomic(chunk_path(directory, chunk.first, chunk.last), data)


def _shared_steps(
    shared: dict[tuple[int, int, int], list[tuple[int, Steps]]], steps: Steps, place: int
) -> int:
    """Where an array equal to ``steps`` is among those written (``place`` when none is, and
    it is noted there): the series of a chunk mostly share their steps."""
    key = (steps.size, int(steps[0]) if steps.size else 0, int(steps[-1]) if steps.size else 0)
    for at, known in shared.setdefault(key, []):
        if np.array_equal(known, steps):
            return at
    shared[key].append((place, steps))
    return place


def chunk_path(directory: str, first: int, last: int) -> str:
    """The file of the chunk of steps ``first`` to ``last`` in ``directory``."""
    return locations.join(directory, f"{first:012d}-{last:012d}{_SUFFIX}")


def chunk_spans(directory: str) -> list[tuple[int, int, str]]:
    """(first, last, path) of each chunk file in ``directory`` (none when it does not exist),
    from the listing alone."""
    spans = []
    for name in files.list_files(directory, _SUFFIX):
        match = _NAME.match(name)
        if match is not None and int(match[2]) >= int(match[1]):
            spans.append((int(match[1]), int(match[2]), locations.join(directory, name)))
    return spans


def follow_chunks(spans: list[tuple[int, int, str]], start: int = 0) -> list[tuple[int, int, str]]:
    """The spans a reader takes, in order, to cover the steps from ``start`` without a gap."""
    chosen: list[tuple[int, int, str]] = []
    following = start
    while True:
        reaching = [span for span in spans if span[0] <= following <= span[1]]
        if not reaching:
            return chosen
        best = max(reaching, key=lambda span: span[1])
        chosen.append(best)
        following = best[1] + 1


def read_scalar_chunks(directory: str, start: int = 0) -> list[ScalarChunk]:
    """The chunks of ``directory`` that cover the steps from ``start`` without a gap, in order,
    each without the steps before ``start`` or another's; none when it does not exist. A chunk
    that cannot be read ends the list (logged)."""
    return read_spans(follow_chunks(chunk_spans(directory), start), start)


def read_spans(spans: list[tuple[int, int, str]], start: int = 0) -> list[ScalarChunk]:
    """The chunks of ``spans`` (as ``follow_chunks`` chose them from ``start``), read: as
    ``read_scalar_chunks``, without listing their directory again."""
    chunks: list[ScalarChunk] = []
    following = start
    for first, last, path in spans:
        try:
            chunk = _read_chunk(path)
        except (OSError, ValueError, KeyError, TypeError, struct.error) as error:
            log.warning("trainprobe: cannot read %s, read up to it: %s", path, error)
            break
        if (chunk.first, chunk.last) != (first, last):
            log.warning("trainprobe: %s holds steps %d-%d", path, chunk.first, chunk.last)
            break
        chunks.append(chunk.after(following - 1))
        following = last + 1
    return chunks


def _read_chunk(path: str) -> ScalarChunk:
    data = files.read_bytes(path)
    if not data.startswith(_MAGIC):
        raise ValueError("not a chunk of scalars")
    at = len(_MAGIC)
    head_length, checksum = _HEAD.unpack_from(data, at)
    at += _HEAD.size
    if crc32c(memoryview(data)[at:]) != checksum:
        raise ValueError("its bytes changed after it was written (CRC32C)")
    head = json.loads(data[at : at + head_length])
    reader = _Arrays(data, at + head_length, [int(size) for size in head["sizes"]])
    series: dict[tuple[str, str], tuple[Steps, Values]] = {}
    for tensor, mode, steps_at, dtype in head["series"]:
        if steps_at == reader.count:
            reader.take(_STEPS)
        steps = reader.taken(int(steps_at), _STEPS)
        values = reader.take(np.dtype(dtype))
        if values.size != steps.size:
            raise ValueError(f"series {tensor!r}: {values.size} values for {steps.size} steps")
        series[(str(tensor), str(mode))] = (steps, values.astype(_VALUES, copy=False))
    written = reader.take(_STEPS) if head["written"] else None
    reader.end()
    return ScalarChunk(int(head["first"]), int(head["last"]), series, written)


class _Arrays:
    """The arrays after a chunk's head, taken in turn as the head says."""

    def __init__(self, data: bytes, at: int, sizes: list[int]) -> None:
        self._data, self._at, self._sizes = data, at, sizes
        self._taken: list[np.ndarray] = []

    @property
    def count(self) -> int:
        return len(self._taken)

    def take(self, dtype: np.dtype[Any]) -> np.ndarray:
        if dtype not in (_STEPS, _VALUES, _NARROW) or self.count >= len(self._sizes):
            raise ValueError(f"array {self.count} of {dtype} is not what a chunk holds")
        size = self._sizes[self.count]
        self._at += -self._at % 8
        array = np.frombuffer(self._data, dtype=dtype, count=size, offset=self._at)
        self._at += array.nbytes
        self._taken.append(array)
        return array

    def taken(self, index: int, dtype: np.dtype[Any]) -> np.ndarray:
        if not 0 <= index < self.count or self._taken[index].dtype != dtype:
            raise ValueError(f"array {index} is not steps")
        return self._taken[index]

    def end(self) -> None:
        if self.count != len(self._sizes) or self._at != len(self._data):
            raise ValueError("its arrays are not the size its head says")
