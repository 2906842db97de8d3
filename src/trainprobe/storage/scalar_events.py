"""The values of many tensor records read together, decoded at once: a step's losses, metrics
and reductions are dozens of one-number records side by side in its event file.

Decoding them one at a time costs far more than their bytes: each is unframed, checked and
walked field by field in Python. ``record_values`` checks the framing of all of them with numpy,
finds where each one's value lies when the record has the layout of a scalar as smdebug and
trainprobe write it::

    [wall_time] [step] summary { value { tag, tensor { dtype, [shape {}], content } [metadata] } }

and reads those values in one gather per dtype. The payload checksums are still checked record
by record (``tfrecord.unframe``'s rules), and every record in any other layout (a tensor with
dimensions, strings, numbers in ``*_val`` fields, a damaged one) is decoded alone by
``tensor_event.decode_tensor_value``: the result is always that of decoding each record alone.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from trainprobe.storage.tensor_event import DTYPE_CODES, decode_tensor_value
from trainprobe.storage.tfrecord import (
    FAKE_DATA_CRC,
    HEADER_SIZE,
    OVERHEAD,
    masked_crc32c,
    unframe,
)

__all__ = ["decode_alone", "record_values", "scalar_values"]

Positions = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

_DTYPES = {code: np.dtype(name).newbyteorder("<") for name, code in DTYPE_CODES.items()}
_MAX_VARINT_BYTES = 5
"""Varints read here (steps, lengths) fit in five bytes: steps below 2**35."""
_LENGTH = struct.Struct("<Q")
_FOOTER = struct.Struct("<I")


def record_values(
    span: memoryview,
    starts: Sequence[int],
    lengths: Sequence[int],
    checksums: Sequence[int | None] | None = None,
) -> list[np.ndarray]:
    """The value of each record (framing included) at ``starts[i]``, ``lengths[i]`` of
    ``span``, checked against ``checksums[i]`` (the index's; None: the footer's rule).

    Equal to ``decode_tensor_value(unframe(record, checksum=...))`` for each record, and raises
    what that raises for the first record it refuses.
    """
    if checksums is None:
        checksums = [None] * len(starts)
    found = scalar_values(span, starts, lengths, checksums)
    return [
        value if value is not None else decode_alone(span, start, length, checksum)
        for value, start, length, checksum in zip(found, starts, lengths, checksums, strict=True)
    ]


def decode_alone(span: memoryview, start: int, length: int, checksum: int | None) -> np.ndarray:
    """The value of the one record at ``start``, ``length`` of ``span``, decoded alone."""
    return decode_tensor_value(unframe(span[start : start + length], checksum=checksum))


def scalar_values(
    span: memoryview,
    starts: Sequence[int],
    lengths: Sequence[int],
    checksums: Sequence[int | None],
) -> list[np.ndarray | None]:
    """``record_values``'s values for the records in the scalar layout whose framing and
    checksum are good; None for each other record (to be decoded alone, which says what is
    wrong with it). Meant for many records at once: numpy's cost is per call, not per record."""
    count = len(starts)
    values: list[np.ndarray | None] = [None] * count
    if not count:
        return values
    data = np.frombuffer(span, dtype=np.uint8)
    begin = np.asarray(starts, dtype=np.int64)
    size = np.asarray(lengths, dtype=np.int64)
    fast = _framed(data, begin, size)
    if not fast.any():
        return values
    found = _scalar_values(data, begin + HEADER_SIZE, begin + size - 4, fast)
    unpack = _FOOTER.unpack_from
    for index, value in found.items():
        start, length = starts[index], lengths[index]
        checksum = checksums[index]
        if checksum is None:
            (footer,) = unpack(span, start + length - 4)
            checksum = None if footer == FAKE_DATA_CRC else footer
        if (
            checksum is None
            or masked_crc32c(span[start + HEADER_SIZE : start + length - 4]) == checksum
        ):
            values[index] = value
    return values


def _framed(data: np.ndarray, begin: Positions, size: Positions) -> Mask:
    """Which records are whole, with a length header that matches and a good length CRC."""
    inside = (size >= OVERHEAD) & (begin >= 0) & (begin + size <= data.size)
    ok = inside.copy()
    if not ok.any():
        return ok
    at = np.where(ok, begin, 0)
    header = data[at[:, None] + np.arange(12)]
    length = np.ascontiguousarray(header[:, :8]).view("<u8").ravel()
    length_crc = np.ascontiguousarray(header[:, 8:12]).view("<u4").ravel()
    ok &= length.astype(np.int64) == size - OVERHEAD
    for each in np.unique(length[ok]).tolist():
        wanted = masked_crc32c(_LENGTH.pack(each))
        ok &= (length != each) | (length_crc == wanted)
    return ok


def _scalar_values(
    data: np.ndarray, payload: Positions, end: Positions, ok: Mask
) -> dict[int, np.ndarray]:
    """The value of each payload (``payload`` to ``end``) in the scalar layout, by position
    among ``ok``'s; payloads in another layout are left out."""
    ok = ok.copy()
    last = data.size - 1

    def byte(at: Positions) -> npt.NDArray[np.int64]:
        return data[np.clip(at, 0, last)].astype(np.int64)

    def varint(at: Positions) -> tuple[npt.NDArray[np.int64], Positions]:
        nonlocal ok
        value = np.zeros(at.shape, dtype=np.int64)
        used = np.zeros(at.shape, dtype=np.int64)
        going = np.ones(at.shape, dtype=bool)
        for shift in range(_MAX_VARINT_BYTES):
            current = byte(at + shift)
            value |= np.where(going, (current & 0x7F) << (7 * shift), 0)
            used += going
            going &= current >= 0x80
            if not going.any():
                break
        ok &= ~going
        return value, at + used

    position = payload.copy()
    position += np.where(byte(position) == 0x09, 9, 0)  # wall_time
    has_step = byte(position) == 0x10
    _, after_step = varint(position + 1)
    position = np.where(has_step, after_step, position)
    for key in (0x2A, 0x0A):  # the summary and its one value, each running to the end
        ok &= byte(position) == key
        length, position = varint(position + 1)
        ok &= position + length == end
    ok &= byte(position) == 0x0A  # the tag, skipped
    length, position = varint(position + 1)
    position += length
    ok &= byte(position) == 0x42  # the tensor: dtype, an empty shape or none, the content
    length, position = varint(position + 1)
    tensor_end = position + length
    ok &= tensor_end <= end
    ok &= byte(position) == 0x08
    code = byte(position + 1)
    position += 2
    has_shape = (byte(position) == 0x12) & (byte(position + 1) == 0x00)
    position += np.where(has_shape, 2, 0)
    ok &= byte(position) == 0x22
    content_size = byte(position + 1)
    position += 2
    ok &= position + content_size == tensor_end
    found: dict[int, np.ndarray] = {}
    for each in np.unique(code[ok]).tolist():
        dtype = _DTYPES.get(each)
        if dtype is None:
            continue
        chosen = np.flatnonzero(ok & (code == each) & (content_size == dtype.itemsize))
        if not chosen.size:
            continue
        raw = data[position[chosen][:, None] + np.arange(dtype.itemsize)]
        numbers = np.ascontiguousarray(raw).view(dtype).reshape(-1)
        for order, index in enumerate(chosen.tolist()):
            found[index] = numbers[order : order + 1].reshape(())
    return found
