"""A compact copy of a tensor output's scalars by step, kept by a reader so that it need not read
every step's files again: chunk files of numpy arrays, each for a run of global steps.

A reader that has read the scalars of steps ``first`` to ``last`` writes them as one chunk::

    <directory>/<first:012>-<last:012>.npz     s0, v0, s1, v1, ...  and  head

``s<i>``/``v<i>`` are the steps (int64) and values (float64) of series ``i``, one scalar tensor
in one mode, and ``head`` is JSON (as bytes) naming each series ``[tensor, mode]`` and the step
range. The chunks of a directory follow each other (each starts the step after the one before
ends); reading stops at the first gap or damaged chunk, so what is read is always a whole
prefix, and the reader reads the steps after it from the output itself. Chunks appear
atomically (``files.write_atomic``) and are local files: a summary of object storage is kept
on the machine that reads it.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import zipfile
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from trainprobe.storage import files

__all__ = ["ScalarChunk", "read_scalar_chunks", "write_scalar_chunk"]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{12})-(\d{12})\.npz$")

Steps = npt.NDArray[np.int64]
Values = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ScalarChunk:
    """The scalars of global steps ``first`` to ``last`` (both included), by (tensor, mode)."""

    first: int
    last: int
    series: dict[tuple[str, str], tuple[Steps, Values]]


def write_scalar_chunk(directory: str, chunk: ScalarChunk) -> str:
    """Write ``chunk`` into ``directory`` (made when missing); its path."""
    keys = list(chunk.series)
    head = {"first": chunk.first, "last": chunk.last, "series": [list(key) for key in keys]}
    arrays: dict[str, np.ndarray] = {"head": np.frombuffer(json.dumps(head).encode(), np.uint8)}
    for index, key in enumerate(keys):
        steps, values = chunk.series[key]
        arrays[f"s{index}"] = np.asarray(steps, dtype=np.int64)
        arrays[f"v{index}"] = np.asarray(values, dtype=np.float64)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{chunk.first:012d}-{chunk.last:012d}.npz")
    files.write_atomic(path, buffer.getvalue())
    return path


def read_scalar_chunks(directory: str) -> list[ScalarChunk]:
    """The chunks of ``directory`` that follow each other from step 0, in order; none when it
    does not exist. A chunk that cannot be read, or that leaves a gap, ends the list (logged)."""
    try:
        names = sorted(name for name in os.listdir(directory) if _NAME.match(name))
    except OSError:
        return []
    chunks: list[ScalarChunk] = []
    following = 0
    for name in names:
        match = _NAME.match(name)
        assert match is not None
        if int(match[1]) != following:
            log.info(
                "trainprobe: %s/%s does not follow step %d: read up to it",
                directory,
                name,
                following,
            )
            break
        try:
            chunk = _read_chunk(os.path.join(directory, name))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            log.warning("trainprobe: cannot read %s/%s, read up to it: %s", directory, name, error)
            break
        chunks.append(chunk)
        following = chunk.last + 1
    return chunks


def _read_chunk(path: str) -> ScalarChunk:
    with np.load(path, allow_pickle=False) as found:
        head = json.loads(found["head"].tobytes())
        series: dict[tuple[str, str], tuple[Steps, Values]] = {}
        for index, (tensor, mode) in enumerate(head["series"]):
            steps, values = found[f"s{index}"], found[f"v{index}"]
            if steps.dtype != np.int64 or values.dtype != np.float64 or steps.shape != values.shape:
                raise ValueError(f"series {index} is not int64 steps and as many float64 values")
            series[(str(tensor), str(mode))] = (steps, values)
        return ScalarChunk(int(head["first"]), int(head["last"]), series)
