"""The masked CRC32Cs of many payloads at once, each a fixed payload with a few bytes filled in
(a step's scalar records: the same names every step; new values, step and time).

A CRC is linear over the bits of the message: setting the byte ``d`` places before a message's
end to ``x`` (from zero) changes its CRC by a value that depends only on ``x`` and ``d``,
whatever the rest of the message. So the CRCs of the filled payloads are those of the fixed ones
(the places left zero), each changed by one table lookup a filled byte: a few numpy operations
for any number of payloads, instead of one ``crc32c`` call each. The tables and the fixed CRCs
come from the ``crc32c`` package, as every other checksum does.

The places: a head at the start of every payload and an end at its end (the same bytes in every
payload of a step), and a value just before the end (each payload's own).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from trainprobe.storage.tfrecord import Buffer, crc32c, mask_checksums

__all__ = ["PatchedChecksums"]

Changes = npt.NDArray[np.uint32]

_BITS = (np.arange(256)[:, None] >> np.arange(8)) & 1  # each byte value's bits, lowest first


@lru_cache(maxsize=4096)
def _change_table(distance: int) -> Changes:
    """How a CRC changes with each byte value set ``distance`` bytes before the message's end."""
    zeros = crc32c(bytes(distance + 1))
    basis = np.array(
        [crc32c(bytes([1 << bit]) + bytes(distance)) ^ zeros for bit in range(8)],
        dtype=np.uint32,
    )
    table: Changes = np.bitwise_xor.reduce(np.where(_BITS == 1, basis, np.uint32(0)), axis=1)
    return table


def _tables(distances: npt.NDArray[np.intp]) -> Changes:
    """The change tables of ``distances``, stacked along a last axis of 256 byte values."""
    stacked: Changes = np.zeros((*distances.shape, 256), dtype=np.uint32)
    for at, distance in np.ndenumerate(distances):
        stacked[at] = _change_table(int(distance))
    return stacked


def _changes(tables: Changes, filled: npt.NDArray[np.uint8]) -> Changes:
    """How the filled bytes change a CRC: the XOR of ``tables[..., i, filled[..., i]]`` over i
    (the tables of a run of places, ``filled`` holding the bytes of one or more runs)."""
    places = np.arange(tables.shape[-2])
    changes: Changes = np.bitwise_xor.reduce(tables[..., places, filled], axis=-1)
    return changes


class PatchedChecksums:
    """The masked CRC32C of each payload ``fixed[start:end]`` of ``spans`` once filled in: its
    first ``head_size`` bytes, its last ``end_size``, and its value just before them (payload
    ``rows[i]`` of each ``(rows, size)`` of ``values`` has a value of ``size`` bytes)."""

    def __init__(
        self,
        fixed: Buffer,
        spans: Sequence[tuple[int, int]],
        head_size: int,
        end_size: int,
        values: Sequence[tuple[npt.NDArray[np.intp], int]],
    ) -> None:
        view = memoryview(fixed)
        self._fixed = np.array([crc32c(view[start:end]) for start, end in spans], dtype=np.uint32)
        sizes = np.array([end - start for start, end in spans], dtype=np.intp)
        lengths, self._length_of = np.unique(sizes, return_inverse=True)
        self._head = _tables(lengths[:, None] - 1 - np.arange(head_size))
        self._end = _tables(end_size - 1 - np.arange(end_size))
        self._values = [
            (rows, _tables(end_size + size - 1 - np.arange(size))) for rows, size in values
        ]

    def checksums(
        self, head: bytes, end: bytes, values: Sequence[npt.NDArray[np.uint8]]
    ) -> list[int]:
        """Each payload's masked CRC32C once ``head`` and ``end`` are in every payload and
        ``values[g][i]`` (its bytes) is in payload ``rows[i]`` of group ``g``."""
        crcs = self._fixed ^ _changes(self._head, np.frombuffer(head, np.uint8))[self._length_of]
        crcs ^= _changes(self._end, np.frombuffer(end, np.uint8))
        for (rows, tables), filled in zip(self._values, values, strict=True):
            crcs[rows] ^= _changes(tables, filled)
        masked: list[int] = mask_checksums(crcs).tolist()
        return masked
