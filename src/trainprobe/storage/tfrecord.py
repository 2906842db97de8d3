"""TFRecord framing, the envelope of every record in an event file.

A record is ``uint64 length`` (little-endian), ``uint32 masked_crc32c(length bytes)``, the
payload, and a ``uint32`` footer. The footer should be the masked CRC32C of the payload; smdebug
writes its tensor files (``events/``) with a constant instead, the masked CRC of the bytes
``b"0x12345678"``, to skip checksumming large tensors. trainprobe does the same for ``events/``
files and writes a real CRC for TensorBoard files. Readers accept either footer.

CRC32C is computed in pure Python with a table: it is only needed for 8-byte length headers and
small TensorBoard records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from trainprobe.errors import FormatError

__all__ = [
    "FAKE_DATA_CRC",
    "HEADER_SIZE",
    "OVERHEAD",
    "RecordError",
    "crc32c",
    "frame",
    "frame_bytes",
    "iter_records",
    "masked_crc32c",
    "unframe",
]

HEADER_SIZE = 12
FOOTER_SIZE = 4
OVERHEAD = HEADER_SIZE + FOOTER_SIZE

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER = struct.Struct("<QI")
# The same lengths recur (a tensor has the same size at every step): their checked CRCs, and
# the headers written for them.
_LENGTH_CRCS: dict[int, int] = {}
_HEADERS: dict[int, bytes] = {}
_CACHE_LIMIT = 4096


def _make_table() -> tuple[int, ...]:
    polynomial = 0x82F63B78  # Castagnoli, reflected
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ polynomial if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


class RecordError(FormatError):
    """A record whose framing is damaged: bad length CRC, bad footer, or truncated."""


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """The CRC32C (Castagnoli) checksum of ``data``."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """TFRecord's masked CRC: rotated right by 15 bits plus a constant, modulo 2**32."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


FAKE_DATA_CRC = masked_crc32c(b"0x12345678")
_FAKE_FOOTER = _CRC.pack(FAKE_DATA_CRC)


def frame(
    payload: Sequence[bytes | memoryview], *, real_crc: bool = False
) -> list[bytes | memoryview]:
    """The record around ``payload`` (given as chunks), as chunks: header, payload..., footer.

    The payload chunks are passed through untouched so that large buffers are never copied.
    ``real_crc`` computes the payload's CRC (for TensorBoard); otherwise the footer is smdebug's
    constant.
    """
    length = sum(len(chunk) for chunk in payload)
    footer = _CRC.pack(masked_crc32c(b"".join(payload))) if real_crc else _FAKE_FOOTER
    return [_header(length), *payload, footer]


def frame_bytes(payload: bytes) -> bytes:
    """The whole record around a small ``payload``, as one bytes object, smdebug's footer.

    The same bytes as joining ``frame([payload])``; meant for the many small records (scalars)
    that a step writes together.
    """
    return _header(len(payload)) + payload + _FAKE_FOOTER


def _header(length: int) -> bytes:
    header = _HEADERS.get(length)
    if header is None:
        length_bytes = _LENGTH.pack(length)
        header = length_bytes + _CRC.pack(masked_crc32c(length_bytes))
        if len(_HEADERS) >= _CACHE_LIMIT:
            _HEADERS.clear()
        _HEADERS[length] = header
    return header


def _check_footer(payload: memoryview, footer: int, *, verify_data: bool) -> None:
    if footer == FAKE_DATA_CRC:
        return
    if verify_data and footer != masked_crc32c(payload):
        raise RecordError("the record's data CRC does not match its payload")


def unframe(record: bytes | bytearray | memoryview, *, verify_data: bool = False) -> memoryview:
    """The payload of one whole record (framing included), checking the length CRC.

    The footer may be smdebug's constant or a real CRC; ``verify_data`` checks a real one.
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
    (footer,) = _CRC.unpack(view[HEADER_SIZE + length :])
    _check_footer(payload, footer, verify_data=verify_data)
    return payload


def iter_records(
    data: bytes | bytearray | memoryview, *, verify_data: bool = False
) -> Iterator[tuple[int, int, memoryview]]:
    """Each record in a whole file's bytes, as (start, length including framing, payload)."""
    view = memoryview(data)
    position = 0
    while position < len(view):
        if len(view) - position < HEADER_SIZE:
            raise RecordError(f"truncated record header at byte {position}")
        (length,) = _LENGTH.unpack(view[position : position + 8])
        end = position + length + OVERHEAD
        if end > len(view):
            raise RecordError(f"truncated record at byte {position}")
        yield position, end - position, unframe(view[position:end], verify_data=verify_data)
        position = end
