"""TFRecord framing, the envelope of every record in an event file, and its checksums.

A record is ``uint64 length`` (little-endian), ``uint32 masked_crc32c(length bytes)``, the
payload, and a ``uint32`` footer, the masked CRC32C of the payload as TensorFlow defines it.

Tensor files (``events/``) keep smdebug's footer, a constant (the masked CRC of the bytes
``b"0x12345678"``): smdebug 1.0.34's trial refuses any other footer there, so a real one would
make trainprobe's output unreadable to it. The payload's real masked CRC32C is written into the
step's index file instead (``index_file``), where smdebug ignores it and trainprobe's reader
checks it. TensorBoard files carry the real CRC in the footer, as TensorFlow's readers expect.

Reading, ``unframe`` always checks the length CRC, and checks the payload against the checksum
the caller has from the index, else against a footer that is a real CRC. A record that has
neither (smdebug's output, trainprobe's before the index carried checksums) is read unverified.

CRCs come from the ``crc32c`` package (hardware-accelerated); they are computed on the hook's
writer thread, never on the training's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from crc32c import crc32c as _crc32c

from trainprobe.errors import FormatError

__all__ = [
    "FAKE_DATA_CRC",
    "FOOTER_SIZE",
    "HEADER_SIZE",
    "OVERHEAD",
    "RecordChecksumError",
    "RecordError",
    "crc32c",
    "frame",
    "frame_bytes",
    "frame_many",
    "iter_records",
    "mask_checksums",
    "masked_crc32c",
    "payload_checksum",
    "unframe",
]

HEADER_SIZE = 12
FOOTER_SIZE = 4
OVERHEAD = HEADER_SIZE + FOOTER_SIZE

Buffer = bytes | bytearray | memoryview

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER = struct.Struct("<QI")
# The same lengths recur (a tensor has the same size at every step): their checked CRCs, and
# the headers written for them.
_LENGTH_CRCS: dict[int, int] = {}
_HEADERS: dict[int, bytes] = {}
_CACHE_LIMIT = 4096


class RecordError(FormatError, ValueError):
    """A record whose framing is damaged: bad length CRC, bad footer, or truncated."""


class RecordChecksumError(RecordError):
    """A record whose payload does not match its checksum: its bytes changed after writing."""

    def __init__(self, expected: int, found: int) -> None:
        self.expected = expected
        self.found = found
        super().__init__(
            f"the record's data does not match its checksum "
            f"(masked CRC32C {found:#010x}, expected {expected:#010x})"
        )


def crc32c(data: Buffer) -> int:
    """The CRC32C (Castagnoli) checksum of ``data``."""
    return int(_crc32c(data))


_Checksums = TypeVar("_Checksums", int, npt.NDArray[np.uint32])


def _mask(crc: _Checksums) -> _Checksums:
    # On a uint32 array the Python ints take its type (numpy's typing says signed).
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF  # type: ignore[return-value]


def mask_checksums(crcs: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """The mask of ``masked_crc32c`` on each CRC of ``crcs`` (uint32: the shift drops the high
    bits, as the mask's must)."""
    return _mask(crcs)


def masked_crc32c(data: Buffer) -> int:
    """TFRecord's masked CRC: rotated right by 15 bits plus a constant, modulo 2**32."""
    return _mask(_crc32c(data))


def payload_checksum(payload: Sequence[Buffer]) -> int:
    """The masked CRC32C of a payload given as chunks, as if they were joined (no copy)."""
    crc = 0
    for chunk in payload:
        crc = _crc32c(chunk, crc)
    return _mask(crc)


FAKE_DATA_CRC = masked_crc32c(b"0x12345678")
_FAKE_FOOTER = _CRC.pack(FAKE_DATA_CRC)


def frame(payload: Sequence[Buffer], *, real_crc: bool = False) -> list[Buffer]:
    """The record around ``payload`` (given as chunks), as chunks: header, payload..., footer.

    The payload chunks are passed through untouched so that large buffers are never copied.
    ``real_crc`` puts the payload's CRC in the footer (TensorBoard); otherwise the footer is
    smdebug's constant.
    """
    length = sum(len(chunk) for chunk in payload)
    footer = _CRC.pack(payload_checksum(payload)) if real_crc else _FAKE_FOOTER
    return [_header(length), *payload, footer]


def frame_bytes(payload: bytes) -> bytes:
    """The whole record around a small ``payload``, as one bytes object, smdebug's footer.

    The same bytes as joining ``frame([payload])``; meant for the many small records (scalars)
    that a step writes together.
    """
    return _header(len(payload)) + payload + _FAKE_FOOTER


def frame_many(payloads: Sequence[bytes]) -> tuple[bytes, list[int], list[int]]:
    """The records around many small ``payloads`` (smdebug's footer), joined, with each
    record's length and each payload's masked CRC32C: ``frame_bytes`` and ``masked_crc32c``
    of each, in one loop (a step writes thousands of scalars)."""
    headers, checksum, footer = _HEADERS, _crc32c, _FAKE_FOOTER
    pieces: list[bytes] = []
    lengths: list[int] = []
    checksums: list[int] = []
    for payload in payloads:
        size = len(payload)
        header = headers.get(size)
        pieces += (header or _header(size), payload, footer)
        lengths.append(size + OVERHEAD)
        checksums.append(_mask(checksum(payload)))
    return b"".join(pieces), lengths, checksums


def _header(length: int) -> bytes:
    header = _HEADERS.get(length)
    if header is None:
        length_bytes = _LENGTH.pack(length)
        header = length_bytes + _CRC.pack(masked_crc32c(length_bytes))
        if len(_HEADERS) >= _CACHE_LIMIT:
            _HEADERS.clear()
        _HEADERS[length] = header
    return header


def unframe(record: Buffer, *, checksum: int | None = None) -> memoryview:
    """The payload of one whole record (framing included), checked.

    The length CRC is always checked. The payload is checked against ``checksum`` (its masked
    CRC32C, from the index) when given, else against the footer unless that is smdebug's
    constant. Raises RecordError (RecordChecksumError for a payload that changed).
    """
    view = memoryview(record)
    if len(view) < OVERHEAD:
        raise RecordError(f"a record needs at least {OVERHEAD} bytes, found {len(view)}")
    (length, length_crc) = _HEADER.unpack_from(view)
    if _LENGTH_CRCS.get(length) != length_crc:
        if length_crc != masked_crc32c(view[:8]):
            raise RecordError("the record's length CRC does not match its length")
        if len(_LENGTH_CRCS) >= _CACHE_LIMIT:
            _LENGTH_CRCS.clear()
        _LENGTH_CRCS[length] = length_crc
    if len(view) != length + OVERHEAD:
        raise RecordError(f"the record says {length} payload bytes, found {len(view) - OVERHEAD}")
    payload = view[HEADER_SIZE : HEADER_SIZE + length]
    if checksum is None:
        (footer,) = _CRC.unpack_from(view, HEADER_SIZE + length)
        if footer == FAKE_DATA_CRC:
            return payload
        checksum = footer
    found = masked_crc32c(payload)
    if found != checksum:
        raise RecordChecksumError(checksum, found)
    return payload


def iter_records(data: Buffer) -> Iterator[tuple[int, int, memoryview]]:
    """Each record in a whole file's bytes, as (start, length including framing, payload).

    Each is checked as ``unframe`` checks it (a real footer is verified).
    """
    view = memoryview(data)
    position = 0
    while position < len(view):
        if len(view) - position < HEADER_SIZE:
            raise RecordError(f"truncated record header at byte {position}")
        (length,) = _LENGTH.unpack(view[position : position + 8])
        end = position + length + OVERHEAD
        if end > len(view):
            raise RecordError(f"truncated record at byte {position}")
        yield position, end - position, unframe(view[position:end])
        position = end
