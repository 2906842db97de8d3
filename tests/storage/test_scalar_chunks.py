"""Chunk files of scalars (``storage.scalar_chunks``): read back as written, and a damaged one
(cut short, or any byte changed) is never read: it ends the chunks read, without an error, so
the steps are read from the step files instead."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainprobe.storage.scalar_chunks import (
    ScalarChunk,
    chunk_path,
    read_scalar_chunks,
    write_scalar_chunk,
)


def _chunk() -> ScalarChunk:
    steps = np.arange(0, 40, 2, dtype=np.int64)
    return ScalarChunk(
        0,
        39,
        {
            ("loss", "TRAIN"): (steps, np.linspace(2.0, 1.0, steps.size)),
            ("größe/ü", "EVAL"): (steps[:3] + 1, np.array([np.nan, np.inf, -0.0])),
        },
        np.arange(40, dtype=np.int64),
    )


def _same(found: ScalarChunk, chunk: ScalarChunk) -> bool:
    return (
        (found.first, found.last) == (chunk.first, chunk.last)
        and list(found.series) == list(chunk.series)
        and all(
            np.array_equal(found.series[key][0], chunk.series[key][0])
            and np.array_equal(found.series[key][1], chunk.series[key][1], equal_nan=True)
            for key in chunk.series
        )
        and found.written is not None
        and np.array_equal(found.written, chunk.written)  # type: ignore[arg-type]
    )


def test_a_chunk_reads_back_as_written(tmp_path: Path) -> None:
    chunk = _chunk()
    write_scalar_chunk(str(tmp_path), chunk)
    [found] = read_scalar_chunks(str(tmp_path))
    assert _same(found, chunk)
    [after] = read_scalar_chunks(str(tmp_path), start=11)  # the steps up to 10 dropped
    assert after.series[("loss", "TRAIN")][0].tolist() == list(range(12, 40, 2))


def test_a_damaged_chunk_is_never_read_as_another(tmp_path: Path) -> None:
    chunk = _chunk()
    write_scalar_chunk(str(tmp_path), chunk)
    path = Path(chunk_path(str(tmp_path), chunk.first, chunk.last))
    whole = path.read_bytes()
    rng = np.random.default_rng(0)
    damaged = [whole[:length] for length in range(0, len(whole), 7)]
    for _ in range(300):
        data = bytearray(whole)
        at = int(rng.integers(len(data)))
        data[at] = (data[at] + int(rng.integers(1, 256))) % 256  # a byte that changed
        damaged.append(bytes(data))
    for data in damaged:
        path.write_bytes(data)
        assert read_scalar_chunks(str(tmp_path)) == [], data
    path.write_bytes(whole)
    [found] = read_scalar_chunks(str(tmp_path))
    assert _same(found, chunk)
