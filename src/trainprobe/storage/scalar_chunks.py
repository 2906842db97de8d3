"""A compact copy of scalars by step, so that a reader need not decode every step's files again:
chunk files of numbers, each for a run of global steps.

Two writers keep them: the hook's writer thread, beside the step files it writes
(``storage.written_scalars``), and a reader that has read a job's scalars (the UI). A chunk of
global steps ``first`` to ``last`` is one file::

    <directory>/<first:012>-<last:012>.chunk

    b"trainprobe-scalars 1\n", the head's length and the CRC32C of all that follows (uint32
    each), the head (JSON), zeros up to a multiple of 8 bytes, then steps (int64), values
    (float64) [, written (int64)]

``steps`` and ``values`` hold every series one after the other, little-endian; the head names
each series ``[tensor, mode]``, says where each ends in the two arrays, the step range, and how
many steps ``written`` lists: in a chunk the hook wrote, the steps whose files it wrote (what
makes a step complete for a reader of several workers). A chunk is read in one go, its arrays
taken as they lie in the file, whatever the number of series; a chunk whose bytes changed is
not read.

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
    "write_scalar_chunk",
]

log = logging.getLogger(__name__)

_SUFFIX = ".chunk"
_NAME = re.compile(r"^(\d{12})-(\d{12})\.chunk$")
_MAGIC = b"trainprobe-scalars 1\n"
_HEAD = struct.Struct("<II")  # the head's length, the CRC32C of the rest
_STEPS, _VALUES = np.dtype("<i8"), np.dtype("<f8")

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
    keys = list(chunk.series)
    steps = [np.asarray(chunk.series[key][0], dtype=_STEPS) for key in keys]
    values = [np.asarray(chunk.series[key][1], dtype=_VALUES) for key in keys]
    written = None if chunk.written is None else np.asarray(chunk.written, dtype=_STEPS)
    head = json.dumps(
        {
            "first": chunk.first,
            "last": chunk.last,
            "series": [list(key) for key in keys],
            "ends": np.cumsum([part.size for part in steps], dtype=np.int64).tolist(),
            "written": None if written is None else int(written.size),
        }
    ).encode()
    start = len(_MAGIC) + _HEAD.size + len(head)
    parts = [head, bytes(-start % 8)]
    parts += [part.tobytes() for part in steps] + [part.tobytes() for part in values]
    if written is not None:
        parts.append(written.tobytes())
    rest = b"".join(parts)
    data = _MAGIC + _HEAD.pack(len(head), crc32c(rest)) + rest
    return files.write_atomic(chunk_path(directory, chunk.first, chunk.last), data)


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
    chunks: list[ScalarChunk] = []
    following = start
    for first, last, path in follow_chunks(chunk_spans(directory), start):
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
    at += head_length
    at += -at % 8
    keys = head["series"]
    ends = [int(end) for end in head["ends"]]
    count = ends[-1] if ends else 0
    written_count = head["written"]
    if written_count is not None and (not isinstance(written_count, int) or written_count < 0):
        raise ValueError(f"written: {written_count!r} is not a count")
    size = 8 * (2 * count + (written_count or 0))
    if len(keys) != len(ends) or ends != sorted(ends) or count < 0 or len(data) != at + size:
        raise ValueError("its arrays are not the size its head says")
    steps = np.frombuffer(data, dtype=_STEPS, count=count, offset=at)
    values = np.frombuffer(data, dtype=_VALUES, count=count, offset=at + 8 * count)
    written = None
    if written_count is not None:
        written = np.frombuffer(data, dtype=_STEPS, count=written_count, offset=at + 16 * count)
    series: dict[tuple[str, str], tuple[Steps, Values]] = {}
    begin = 0
    for (tensor, mode), end in zip(keys, ends, strict=True):
        series[(str(tensor), str(mode))] = (steps[begin:end], values[begin:end])
        begin = end
    return ScalarChunk(int(head["first"]), int(head["last"]), series, written)
