"""The few pieces of the protobuf wire format that trainprobe needs, written by hand.

Only what TF's Event, Summary and TensorProto messages use: varints, 64- and 32-bit fixed
values, and length-delimited fields. Writing them by hand keeps protobuf out of the
dependencies and lets a tensor's bytes go to disk without being copied into a message.
"""

from __future__ import annotations

import struct

from trainprobe.errors import FormatError

Buffer = bytes | bytearray | memoryview
Field = tuple[int, int, int, int]

__all__ = [
    "FIXED32",
    "FIXED64",
    "LENGTH_DELIMITED",
    "VARINT",
    "WireError",
    "double_field",
    "key",
    "length_prefix",
    "message_field",
    "read_varint",
    "scan",
    "varint",
    "varint_field",
]

VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
FIXED32 = 5

_DOUBLE = struct.Struct("<d")
# Nearly every key and length fits in one byte: those varints are made once.
_ONE_BYTE = tuple(bytes((value,)) for value in range(0x80))


class WireError(FormatError):
    """Bytes that are not a well-formed protobuf message."""


def varint(value: int) -> bytes:
    """``value`` as a base-128 varint; negative int64 values take ten bytes, as in protobuf."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    """The key that starts a field: its number and wire type."""
    return varint((field << 3) | wire_type)


def length_prefix(field: int, length: int) -> bytes:
    """Key and length of a length-delimited field whose body follows separately."""
    return varint((field << 3) | LENGTH_DELIMITED) + varint(length)


def message_field(field: int, body: bytes) -> bytes:
    """A length-delimited field (a string, bytes or an embedded message)."""
    return length_prefix(field, len(body)) + body


def varint_field(field: int, value: int) -> bytes:
    """A varint field; empty when ``value`` is 0 (proto3 leaves defaults out)."""
    return key(field, VARINT) + varint(value) if value else b""


def double_field(field: int, value: float) -> bytes:
    """A double field; empty when ``value`` is 0.0 (proto3 leaves defaults out)."""
    return key(field, FIXED64) + _DOUBLE.pack(value) if value else b""


def read_varint(data: Buffer, position: int) -> tuple[int, int]:
    """The varint at ``position`` and the position after it."""
    result = 0
    shift = 0
    end = len(data)
    while True:
        if position >= end:
            raise WireError("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift >= 70:
            raise WireError("varint too long")


def scan(data: Buffer, position: int = 0, end: int | None = None) -> list[Field]:
    """The fields of the message in ``data[position:end]``, in order, without copying.

    Each is (field number, wire type, a, b): for a varint ``a`` is the value; for
    length-delimited and fixed-size fields ``data[a:b]`` is the body. One-byte keys and
    lengths, which are nearly all of them, take a fast path.
    """
    if end is None:
        end = len(data)
    fields: list[Field] = []
    append = fields.append
    while position < end:
        key = data[position]
        if key & 0x80:
            key, position = read_varint(data, position)
        else:
            position += 1
        wire_type = key & 7
        if wire_type in (LENGTH_DELIMITED, VARINT):
            if position >= end:
                raise WireError(f"field {key >> 3} runs past the end of the message")
            value = data[position]
            if value & 0x80:
                value, position = read_varint(data, position)
            else:
                position += 1
            if wire_type == VARINT:
                append((key >> 3, VARINT, value, 0))
                continue
            append((key >> 3, LENGTH_DELIMITED, position, position + value))
            position += value
        elif wire_type == FIXED64:
            append((key >> 3, FIXED64, position, position + 8))
            position += 8
        elif wire_type == FIXED32:
            append((key >> 3, FIXED32, position, position + 4))
            position += 4
        else:
            raise WireError(f"unsupported wire type {wire_type} for field {key >> 3}")
    if position > end:
        raise WireError("the last field runs past the end of the message")
    return fields
