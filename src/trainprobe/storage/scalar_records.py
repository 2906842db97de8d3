"""A step's scalar records (0-d tensors: the hook's reductions and losses), encoded and framed
together from a byte layout kept for each batch of names.

A hook writes the same scalars at every step: from one step to the next their records differ
only in the event's head (wall time, step), its end (mode, mode step) and each content. The
layout of a batch (the framed records with those places left blank, and where the places are)
is made once; a step fills the places in and patches the payloads' checksums
(``patched_checksums``), a few numpy operations whatever the number of scalars. The bytes are
exactly ``tfrecord.frame_many`` of ``tensor_event.encode_scalar_events``'s, which a batch with a
dtype that is not a number type (strings) still takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.patched_checksums import PatchedChecksums
from trainprobe.storage.tensor_event import (
    encode_scalar_events,
    scalar_event_ends,
    scalar_event_middle,
)
from trainprobe.storage.tfrecord import (
    FOOTER_SIZE,
    HEADER_SIZE,
    frame_bytes,
    frame_many,
)

__all__ = ["ScalarRecords", "encode_scalar_records"]

_KEPT_LAYOUTS = 64

Positions = npt.NDArray[np.intp]


@dataclass(frozen=True)
class ScalarRecords:
    """Framed records one after the other, each record's length and its payload's masked
    CRC32C (what a step's index says of it)."""

    data: bytes
    lengths: list[int]
    checksums: list[int]


class _Layout:
    """The framed records of a batch of names with their head, content and end left blank."""

    def __init__(
        self, names: Sequence[str], dtypes: Sequence[str], head_size: int, end_size: int
    ) -> None:
        records: list[bytes] = []
        head_starts, end_starts, spans = [], [], []
        contents: dict[str, tuple[np.dtype[np.generic], list[int], list[int]]] = {}
        offset = 0
        for index, (name, dtype) in enumerate(zip(names, dtypes, strict=True)):
            found = scalar_event_middle(name, dtype, end_size)
            if found is None:
                raise TypeError(f"{dtype} is not a number type")
            middle, little = found
            size = little.itemsize
            record = frame_bytes(bytes(head_size) + middle + bytes(size + end_size))
            payload = offset + HEADER_SIZE
            head_starts.append(payload)
            content = payload + head_size + len(middle)
            group = contents.setdefault(dtype, (little, [], []))
            group[1].append(index)
            group[2].append(content)
            end_starts.append(content + size)
            spans.append((payload, offset + len(record) - FOOTER_SIZE))
            records.append(record)
            offset += len(record)
        joined = b"".join(records)
        self.template = np.frombuffer(joined, dtype=np.uint8)
        self.lengths = [len(record) for record in records]
        self.head_at = _positions(head_starts, head_size)
        self.end_at = _positions(end_starts, end_size)
        self.contents = [
            (little, np.asarray(rows, dtype=np.intp), _positions(starts, little.itemsize))
            for little, rows, starts in contents.values()
        ]
        self.checksums = PatchedChecksums(
            joined,
            spans,
            head_size,
            end_size,
            [(rows, little.itemsize) for little, rows, _ in self.contents],
        )

    def fill(self, head: bytes, end: bytes, values: np.ndarray) -> ScalarRecords:
        data = self.template.copy()
        count = len(self.lengths)
        data[self.head_at] = np.tile(np.frombuffer(head, dtype=np.uint8), count)
        data[self.end_at] = np.tile(np.frombuffer(end, dtype=np.uint8), count)
        filled = []
        for little, rows, at in self.contents:
            content = values[rows].astype(little).view(np.uint8)
            data[at] = content
            filled.append(content.reshape(len(rows), little.itemsize))
        checksums = self.checksums.checksums(head, end, filled)
        return ScalarRecords(data.tobytes(), self.lengths, checksums)


def _positions(starts: list[int], size: int) -> Positions:
    """Every position of ``size`` bytes from each of ``starts``."""
    return (np.asarray(starts, dtype=np.intp)[:, None] + np.arange(size, dtype=np.intp)).ravel()


_LAYOUTS: dict[tuple[tuple[str, ...], tuple[str, ...], int, int], _Layout | None] = {}


def encode_scalar_records(
    names: Sequence[str],
    dtypes: Sequence[str],
    values: np.ndarray,
    *,
    step: int,
    mode: ModeKeys,
    mode_step: int,
    wall_time: float,
    original_dtype: str | None = None,
) -> ScalarRecords:
    """The framed records of ``encode_scalar_events(names, dtypes, values, ...)``. Raises
    TypeError for a dtype that cannot be saved."""
    flat = np.asarray(values).reshape(-1)
    head, end = scalar_event_ends(
        step=step,
        mode=mode,
        mode_step=mode_step,
        wall_time=wall_time,
        original_dtype=original_dtype,
    )
    key = (tuple(names), tuple(dtypes), len(head), len(end))
    if key not in _LAYOUTS:
        if len(_LAYOUTS) >= _KEPT_LAYOUTS:
            _LAYOUTS.clear()
        try:
            _LAYOUTS[key] = _Layout(names, dtypes, len(head), len(end))
        except TypeError:
            _LAYOUTS[key] = None
    layout = _LAYOUTS[key]
    if layout is None or flat.size != len(names):
        payloads = encode_scalar_events(
            names,
            dtypes,
            flat,
            step=step,
            mode=mode,
            mode_step=mode_step,
            wall_time=wall_time,
            original_dtype=original_dtype,
        )
        return ScalarRecords(*frame_many(payloads))
    return layout.fill(head, end, flat)
