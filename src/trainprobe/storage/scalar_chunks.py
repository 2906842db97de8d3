"""A compact copy of scalars by step, so that a reader need not decode every step's files again:
chunk files of numpy arrays, each for a run of global steps.

Two writers keep them: the hook's writer thread, beside the step files it writes
(``storage.written_scalars``), and a reader that has read a job's scalars (the UI). A chunk of
global steps ``first`` to ``last`` is one file::

    <directory>/<first:012>-<last:012>.npz     head, steps, values [, written]

``steps`` (int64) and ``values`` (float64) hold every series one after the other; ``head`` is
JSON (as bytes) naming each series ``[tensor, mode]``, where it ends in the two arrays, and the
step range. ``written``, in a chunk the hook wrote, lists the steps whose files it wrote (what
makes a step complete for a reader of several workers). Three arrays whatever the number of
series: a chunk loads in one pass.

A reader follows chunks from a step on: each next chunk is the one reaching furthest among those
that start at or before the step after what it has (chunks written by two readers may overlap;
the steps already had are dropped). It stops at a gap or a damaged chunk, so what is read is
always a whole prefix, and the steps after it are read from the output itself. Chunks appear
atomically (``files.write_atomic``), locally or in object storage.
"""

from __future__ import annotations

import io
import json
import logging
import re
import zipfile
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from trainprobe.storage import files, locations

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

_NAME = re.compile(r"^(\d{12})-(\d{12})\.npz$")

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
    steps = [np.asarray(chunk.series[key][0], dtype=np.int64) for key in keys]
    values = [np.asarray(chunk.series[key][1], dtype=np.float64) for key in keys]
    head = {
        "first": chunk.first,
        "last": chunk.last,
        "series": [list(key) for key in keys],
        "ends": np.cumsum([part.size for part in steps], dtype=np.int64).tolist(),
    }
    arrays = {
        "head": np.frombuffer(json.dumps(head).encode(), np.uint8),
        "steps": np.concatenate(steps) if steps else np.empty(0, np.int64),
        "values": np.concatenate(values) if values else np.empty(0, np.float64),
    }
    if chunk.written is not None:
        arrays["written"] = np.asarray(chunk.written, dtype=np.int64)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return files.write_atomic(chunk_path(directory, chunk.first, chunk.last), buffer.getbuffer())


def chunk_path(directory: str, first: int, last: int) -> str:
    """The file of the chunk of steps ``first`` to ``last`` in ``directory``."""
    return locations.join(directory, f"{first:012d}-{last:012d}.npz")


def chunk_spans(directory: str) -> list[tuple[int, int, str]]:
    """(first, last, path) of each chunk file in ``directory`` (none when it does not exist),
    from the listing alone."""
    spans = []
    for name in files.list_files(directory, ".npz"):
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
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            log.warning("trainprobe: cannot read %s, read up to it: %s", path, error)
            break
        if (chunk.first, chunk.last) != (first, last):
            log.warning("trainprobe: %s holds steps %d-%d", path, chunk.first, chunk.last)
            break
        chunks.append(chunk.after(following - 1))
        following = last + 1
    return chunks


def _read_chunk(path: str) -> ScalarChunk:
    with np.load(io.BytesIO(files.read_bytes(path)), allow_pickle=False) as found:
        head = json.loads(found["head"].tobytes())
        steps, values = found["steps"], found["values"]
        ends = [int(end) for end in head["ends"]]
        keys = head["series"]
        if (
            steps.dtype != np.int64
            or values.dtype != np.float64
            or steps.shape != values.shape
            or len(ends) != len(keys)
            or (ends and ends[-1] != steps.size)
            or ends != sorted(ends)
        ):
            raise ValueError("not int64 steps and as many float64 values, ended as the head says")
        series: dict[tuple[str, str], tuple[Steps, Values]] = {}
        begin = 0
        for (tensor, mode), end in zip(keys, ends, strict=True):
            series[(str(tensor), str(mode))] = (steps[begin:end], values[begin:end])
            begin = end
        written = found["written"] if "written" in found.files else None
        if written is not None and written.dtype != np.int64:
            raise ValueError("written steps are not int64")
        return ScalarChunk(int(head["first"]), int(head["last"]), series, written)
