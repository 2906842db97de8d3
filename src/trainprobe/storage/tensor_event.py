"""One saved tensor as a TF ``Event`` protobuf message, smdebug's payload, encoded by hand.

The message written for a tensor ``name`` at a global ``step``::

    Event {wall_time: 1, step: 2, summary: 5 {value: 1 [{
        tag: 1 = name,
        tensor: 8 = TensorProto {
            dtype: 1,
            tensor_shape: 2 {dim: 2 [{size: 1, name: 2 = "<name>_<size>"}]},
            tensor_content: 4 (raw C-order bytes) | string_val: 8 (strings)},
        metadata: 9 {plugin_data: 1 [{plugin_name: "mode_step", content: "<mode step>"},
                                     {plugin_name: "mode", content: "<ModeKeys number>"}]}}]}}

Fields are written in field-number order and proto3 defaults are left out, as protobuf does, so
the bytes equal smdebug's for the same tensor and wall time. The tensor's bytes are handed back
as a memoryview of the array: they reach the file without a copy.

Scalars (0-d tensors) have a fast path, ``encode_scalar_events``, for the dozens a hook writes at
every step (reductions, losses): a scalar's message differs from one step to the next only in
its value, step, wall time and mode step, so each name's tag and tensor head are made once and a
step's messages are joined from those pieces, with the same bytes as the general encoder's.

numpy has no bfloat16: such tensors arrive as float32 with ``original_dtype="bfloat16"``, kept
in a third plugin entry (``original_dtype``) that smdebug's reader ignores.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from trainprobe.storage import protobuf_wire as wire
from trainprobe.storage.modes import ModeKeys

__all__ = [
    "DTYPE_CODES",
    "TensorEvent",
    "decode_tensor_event",
    "decode_tensor_value",
    "encode_scalar_events",
    "encode_tensor_event",
    "scalar_event_ends",
    "scalar_event_middle",
]

MODE_STEP_PLUGIN = "mode_step"
MODE_PLUGIN = "mode"
ORIGINAL_DTYPE_PLUGIN = "original_dtype"

DT_STRING = 7

# numpy dtype name -> TF DataType number (tensorflow/core/framework/types.proto)
DTYPE_CODES: dict[str, int] = {
    "float32": 1,
    "float64": 2,
    "int32": 3,
    "uint8": 4,
    "int16": 5,
    "int8": 6,
    "complex64": 8,
    "int64": 9,
    "bool": 10,
    "uint16": 17,
    "complex128": 18,
    "float16": 19,
    "uint32": 22,
    "uint64": 23,
}
_NUMPY_DTYPES: dict[int, np.dtype[np.generic]] = {
    code: np.dtype(name).newbyteorder("<") for name, code in DTYPE_CODES.items()
}

# Event, Summary.Value, TensorProto, TensorShapeProto, and their field numbers
_EVENT_WALL_TIME, _EVENT_STEP, _EVENT_SUMMARY = 1, 2, 5
_SUMMARY_VALUE = 1
_VALUE_TAG, _VALUE_TENSOR, _VALUE_METADATA = 1, 8, 9
_METADATA_PLUGIN_DATA = 1
_PLUGIN_NAME, _PLUGIN_CONTENT = 1, 2
_TENSOR_DTYPE, _TENSOR_SHAPE, _TENSOR_CONTENT = 1, 2, 4
_TENSOR_FLOAT_VAL, _TENSOR_DOUBLE_VAL, _TENSOR_INT_VAL = 5, 6, 7
_TENSOR_STRING_VAL, _TENSOR_INT64_VAL, _TENSOR_BOOL_VAL = 8, 10, 11
_SHAPE_DIM = 2
_DIM_SIZE, _DIM_NAME = 1, 2

Chunk = bytes | memoryview

# The keys of Event.summary and Summary.value; a 0-d tensor's TensorShapeProto (no dims).
_SUMMARY_KEY = wire.key(_EVENT_SUMMARY, wire.LENGTH_DELIMITED)
_VALUE_KEY = wire.key(_SUMMARY_VALUE, wire.LENGTH_DELIMITED)
_NO_DIMS = wire.message_field(_TENSOR_SHAPE, b"")
# numpy dtype name -> (TF DataType number, little-endian dtype, item size)
_SCALAR_DTYPES: dict[str, tuple[int, np.dtype[np.generic], int]] = {
    name: (code, _NUMPY_DTYPES[code], _NUMPY_DTYPES[code].itemsize)
    for name, code in DTYPE_CODES.items()
}
_CACHE_LIMIT = 1 << 16
_SMALL_CACHE_LIMIT = 64
_SHAPE_FIELDS: dict[tuple[str, tuple[int, ...]], bytes] = {}
_SCALAR_MIDDLES: dict[tuple[str, int, int, int], bytes] = {}
_METADATA_FIELDS: dict[tuple[int, int, str | None], bytes] = {}


@dataclass
class TensorEvent:
    """A decoded tensor record: the tensor, where it belongs, and how it was stored."""

    name: str
    step: int
    mode: ModeKeys
    mode_step: int
    wall_time: float
    shape: tuple[int, ...]
    dtype_code: int
    content: memoryview | None = None
    strings: list[bytes] = field(default_factory=list)
    original_dtype: str | None = None
    numbers: list[float] | None = None

    def value(self) -> np.ndarray:
        """The tensor as a numpy array (a view of the record's bytes when they are writable)."""
        if self.dtype_code in (0, DT_STRING) and (self.strings or not self.content):
            return np.array([s.decode("utf-8") for s in self.strings]).reshape(self.shape)
        dtype = _NUMPY_DTYPES.get(self.dtype_code)
        if dtype is None:
            raise TypeError(f"tensor {self.name!r}: unsupported TF dtype code {self.dtype_code}")
        if self.content is not None and len(self.content):
            return np.frombuffer(self.content, dtype=dtype).reshape(self.shape)
        if self.numbers:
            values = np.asarray(self.numbers, dtype=dtype)
            if values.size == 1:
                return np.broadcast_to(values, self.shape).copy()
            return values.reshape(self.shape)
        return np.zeros(self.shape, dtype=dtype)


def _plugin(name: str, content: str) -> bytes:
    body = wire.message_field(_PLUGIN_NAME, name.encode())
    if content:
        body += wire.message_field(_PLUGIN_CONTENT, content.encode())
    return wire.message_field(_METADATA_PLUGIN_DATA, body)


def _metadata_field(mode: ModeKeys, mode_step: int, original_dtype: str | None) -> bytes:
    """Summary.Value's metadata field: the mode step, the mode (and the original dtype).

    Every tensor of a step carries the same one: the recent ones are remembered.
    """
    cache_key = (int(mode), mode_step, original_dtype)
    found = _METADATA_FIELDS.get(cache_key)
    if found is None:
        metadata = _plugin(MODE_STEP_PLUGIN, str(mode_step)) + _plugin(MODE_PLUGIN, str(int(mode)))
        if original_dtype is not None:
            metadata += _plugin(ORIGINAL_DTYPE_PLUGIN, original_dtype)
        found = wire.message_field(_VALUE_METADATA, metadata)
        if len(_METADATA_FIELDS) >= _SMALL_CACHE_LIMIT:
            _METADATA_FIELDS.clear()
        _METADATA_FIELDS[cache_key] = found
    return found


def _shape(name: str, shape: tuple[int, ...]) -> bytes:
    # A tensor has the same name and shape at every step: the recent ones are remembered.
    cache_key = (name, shape)
    found = _SHAPE_FIELDS.get(cache_key)
    if found is None:
        dims = b"".join(
            wire.message_field(
                _SHAPE_DIM,
                wire.varint_field(_DIM_SIZE, size)
                + wire.message_field(_DIM_NAME, f"{name}_{size}".encode()),
            )
            for size in shape
        )
        found = wire.message_field(_TENSOR_SHAPE, dims)
        if len(_SHAPE_FIELDS) >= _CACHE_LIMIT:
            _SHAPE_FIELDS.clear()
        _SHAPE_FIELDS[cache_key] = found
    return found


def _tensor_body(name: str, array: np.ndarray) -> list[Chunk]:
    """TensorProto's body: dtype and shape, then the content (or the strings)."""
    shape = _shape(name, tuple(int(size) for size in array.shape))
    if array.dtype.kind in "USO":
        strings = b"".join(
            wire.message_field(_TENSOR_STRING_VAL, str(item).encode("utf-8"))
            for item in array.reshape(-1)
        )
        return [shape + strings]
    code = DTYPE_CODES.get(array.dtype.name)
    if code is None:
        raise TypeError(
            f"tensor {name!r}: dtype {array.dtype} cannot be saved; "
            f"allowed: {', '.join(sorted(DTYPE_CODES))} or strings"
        )
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    array = np.ascontiguousarray(array)
    head = wire.varint_field(_TENSOR_DTYPE, code) + shape
    if array.nbytes == 0:
        return [head]
    content = array.reshape(-1).view(np.uint8).data
    return [head + wire.length_prefix(_TENSOR_CONTENT, array.nbytes), content]


def _event_head(wall_time: float, step: int) -> bytes:
    return wire.double_field(_EVENT_WALL_TIME, wall_time) + wire.varint_field(_EVENT_STEP, step)


def encode_tensor_event(
    name: str,
    array: np.ndarray,
    *,
    step: int,
    mode: ModeKeys,
    mode_step: int,
    wall_time: float,
    original_dtype: str | None = None,
) -> list[Chunk]:
    """The Event message for one tensor, as chunks to write in order.

    The tensor's bytes are one of the chunks, a memoryview of ``array`` (or of a contiguous
    little-endian copy when ``array`` is neither). Strings go into ``string_val``.
    """
    tensor = _tensor_body(name, np.asarray(array))
    tensor_length = sum(len(chunk) for chunk in tensor)
    metadata_field = _metadata_field(mode, mode_step, original_dtype)
    tag = wire.message_field(_VALUE_TAG, name.encode("utf-8"))
    tensor_prefix = wire.length_prefix(_VALUE_TENSOR, tensor_length)
    value_length = len(tag) + len(tensor_prefix) + tensor_length + len(metadata_field)
    value_prefix = wire.length_prefix(_SUMMARY_VALUE, value_length)
    summary_length = len(value_prefix) + value_length
    head = (
        _event_head(wall_time, step)
        + wire.length_prefix(_EVENT_SUMMARY, summary_length)
        + value_prefix
        + tag
        + tensor_prefix
    )
    return [head + tensor[0], *tensor[1:], metadata_field]


def _scalar_prefix(name: str, code: int, size: int) -> bytes:
    """A 0-d tensor's Summary.Value up to its content: the tag, then TensorProto's head."""
    tensor_head = (
        wire.varint_field(_TENSOR_DTYPE, code)
        + _NO_DIMS
        + wire.length_prefix(_TENSOR_CONTENT, size)
    )
    return (
        wire.message_field(_VALUE_TAG, name.encode("utf-8"))
        + wire.length_prefix(_VALUE_TENSOR, len(tensor_head) + size)
        + tensor_head
    )


def encode_scalar_events(
    names: Sequence[str],
    dtypes: Sequence[str],
    values: np.ndarray,
    *,
    step: int,
    mode: ModeKeys,
    mode_step: int,
    wall_time: float,
    original_dtype: str | None = None,
) -> list[bytes]:
    """The Event messages of many 0-d tensors of one step, each as one bytes object.

    ``names[i]`` holds ``values[i]`` (``values`` is flat) as a 0-d array of numpy dtype
    ``dtypes[i]``: the bytes equal ``encode_tensor_event``'s for
    ``np.asarray(values[i], dtype=dtypes[i])``. The scalars a hook writes at every step
    (reductions, losses) differ from step to step only in their value, step, wall time and mode
    step, so each name's tag and tensor head are made once and the rest is joined from pieces.
    Raises TypeError for a dtype that cannot be saved.
    """
    flat = np.asarray(values).reshape(-1)
    head = _event_head(wall_time, step)
    metadata = _metadata_field(mode, mode_step, original_dtype)
    payloads: list[bytes] = []
    for index, (name, dtype, content) in enumerate(
        zip(names, dtypes, _scalar_contents(flat, dtypes), strict=True)
    ):
        if content is None:  # strings, or a dtype that cannot be saved (raises TypeError)
            chunks = encode_tensor_event(
                name,
                np.asarray(flat[index], dtype=dtype),
                step=step,
                mode=mode,
                mode_step=mode_step,
                wall_time=wall_time,
                original_dtype=original_dtype,
            )
            payloads.append(b"".join(chunks))
            continue
        middle = _scalar_middle(name, _SCALAR_DTYPES[dtype][0], len(content), len(metadata))
        payloads.append(head + middle + content + metadata)
    return payloads


def scalar_event_ends(
    *, step: int, mode: ModeKeys, mode_step: int, wall_time: float, original_dtype: str | None
) -> tuple[bytes, bytes]:
    """What every 0-d tensor event of one step starts with (its wall time and step) and ends
    with (its mode and mode step): ``head + scalar_event_middle(...) + content + metadata``."""
    return _event_head(wall_time, step), _metadata_field(mode, mode_step, original_dtype)


def scalar_event_middle(
    name: str, dtype: str, metadata_size: int
) -> tuple[bytes, np.dtype[np.generic]] | None:
    """The bytes of a 0-d tensor event between its head and its content, the same at every step
    (a ``metadata_size`` long ending), and the little-endian dtype its content is written in;
    None for a dtype that is not a number type."""
    known = _SCALAR_DTYPES.get(dtype)
    if known is None:
        return None
    code, little, size = known
    return _scalar_middle(name, code, size, metadata_size), little


def _scalar_middle(name: str, code: int, size: int, metadata_size: int) -> bytes:
    """A 0-d tensor's Event from after its head to its content: the summary's and the value's
    keys and lengths, the tag and the tensor's head (the same at every step)."""
    cache_key = (name, code, size, metadata_size)
    found = _SCALAR_MIDDLES.get(cache_key)
    if found is None:
        prefix = _scalar_prefix(name, code, size)
        value_length = len(prefix) + size + metadata_size
        value_prefix = _VALUE_KEY + wire.varint(value_length)
        found = _SUMMARY_KEY + wire.varint(len(value_prefix) + value_length) + value_prefix + prefix
        if len(_SCALAR_MIDDLES) >= _CACHE_LIMIT:
            _SCALAR_MIDDLES.clear()
        _SCALAR_MIDDLES[cache_key] = found
    return found


def _scalar_contents(flat: np.ndarray, dtypes: Sequence[str]) -> list[bytes | None]:
    """Each value's bytes in its dtype (None where the dtype is not a number type), converting
    the values of one dtype together."""
    contents: list[bytes | None] = [None] * len(dtypes)
    for dtype in dict.fromkeys(dtypes):
        known = _SCALAR_DTYPES.get(dtype)
        if known is None:
            continue
        _, little, size = known
        positions = [index for index, each in enumerate(dtypes) if each == dtype]
        raw = flat[positions].astype(little).tobytes()
        for order, index in enumerate(positions):
            contents[index] = raw[order * size : (order + 1) * size]
    return contents


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(data: memoryview, start: int, stop: int) -> str:
    return bytes(data[start:stop]).decode("utf-8")


_DOUBLE = struct.Struct("<d")
# Keys of Event.summary, Summary.value, Value.tag and Value.tensor, in the usual layout.
_USUAL_KEYS = (0x2A, 0x0A, 0x0A, 0x42)
_SHAPES: dict[bytes, tuple[int, ...]] = {}
_METADATA: dict[bytes, tuple[ModeKeys | None, int | None, str | None]] = {}

_PACKED = {_TENSOR_FLOAT_VAL: "f", _TENSOR_DOUBLE_VAL: "d"}
_VARINTS = (_TENSOR_INT_VAL, _TENSOR_INT64_VAL, _TENSOR_BOOL_VAL)


def _decode_numbers(data: memoryview, number: int, wire_type: int, a: int, b: int) -> list[float]:
    """Values of float_val, double_val, int_val, int64_val or bool_val, packed or not."""
    if wire_type == wire.VARINT:
        return [_signed(a)]
    if number in _PACKED:
        fmt = _PACKED[number]
        return list(struct.unpack(f"<{(b - a) // struct.calcsize(fmt)}{fmt}", data[a:b]))
    numbers: list[float] = []
    position = a
    while position < b:
        value, position = wire.read_varint(data, position)
        numbers.append(_signed(value))
    return numbers


def _decode_tensor(event: TensorEvent, data: memoryview, start: int, stop: int) -> None:
    for number, wire_type, a, b in wire.scan(data, start, stop):
        if number == _TENSOR_CONTENT:
            event.content = data[a:b]
        elif number == _TENSOR_DTYPE:
            event.dtype_code = a
        elif number == _TENSOR_SHAPE:
            event.shape = _decode_shape(data, a, b)
        elif number == _TENSOR_STRING_VAL:
            event.strings.append(bytes(data[a:b]))
        elif number in _PACKED or number in _VARINTS:
            found = _decode_numbers(data, number, wire_type, a, b)
            event.numbers = found if event.numbers is None else event.numbers + found


def _decode_shape(data: memoryview, start: int, stop: int) -> tuple[int, ...]:
    # A tensor has the same shape message at every step: remember the decoded ones.
    body = bytes(data[start:stop])
    shape = _SHAPES.get(body)
    if shape is None:
        dims: list[int] = []
        for number, _, a, b in wire.scan(data, start, stop):
            if number == _SHAPE_DIM:
                size = 0
                for dim_number, dim_type, value, _ in wire.scan(data, a, b):
                    if dim_number == _DIM_SIZE and dim_type == wire.VARINT:
                        size = _signed(value)
                dims.append(size)
        shape = tuple(dims)
        if len(_SHAPES) >= _CACHE_LIMIT:
            _SHAPES.clear()
        _SHAPES[body] = shape
    return shape


def _decode_metadata(event: TensorEvent, data: memoryview, start: int, stop: int) -> None:
    # Every tensor of a step carries the same metadata message: remember the decoded ones.
    body = bytes(data[start:stop])
    found = _METADATA.get(body)
    if found is None:
        found = _parse_metadata(data, start, stop)
        if len(_METADATA) >= _CACHE_LIMIT:
            _METADATA.clear()
        _METADATA[body] = found
    mode, mode_step, original_dtype = found
    if mode is not None:
        event.mode = mode
    if mode_step is not None:
        event.mode_step = mode_step
    event.original_dtype = original_dtype


def _parse_metadata(
    data: memoryview, start: int, stop: int
) -> tuple[ModeKeys | None, int | None, str | None]:
    mode: ModeKeys | None = None
    mode_step: int | None = None
    original_dtype: str | None = None
    for number, _, a, b in wire.scan(data, start, stop):
        if number != _METADATA_PLUGIN_DATA:
            continue
        name = content = ""
        for plugin_number, _, plugin_a, plugin_b in wire.scan(data, a, b):
            if plugin_number == _PLUGIN_NAME:
                name = _text(data, plugin_a, plugin_b)
            elif plugin_number == _PLUGIN_CONTENT:
                content = _text(data, plugin_a, plugin_b)
        if name == MODE_STEP_PLUGIN:
            mode_step = int(content or 0)
        elif name == MODE_PLUGIN:
            mode = ModeKeys(int(content or ModeKeys.GLOBAL))
        elif name == ORIGINAL_DTYPE_PLUGIN:
            original_dtype = content
    return mode, mode_step, original_dtype


def decode_tensor_event(payload: memoryview | bytes | bytearray) -> TensorEvent:
    """The tensor in an Event message (the first summary value); the inverse of the encoder.

    The content is a view of ``payload``, not a copy. Without mode metadata the mode is
    GLOBAL and the mode step is the global step, as smdebug reads it. Raises ValueError
    (WireError) for a malformed message and when it holds no tensor.
    """
    data = memoryview(payload)
    event = TensorEvent(
        name="", step=0, mode=ModeKeys.GLOBAL, mode_step=0, wall_time=0.0, shape=(), dtype_code=0
    )
    if _decode_usual_layout(event, data):
        return event
    summary: tuple[int, int] | None = None
    for number, wire_type, a, b in wire.scan(data):
        if number == _EVENT_WALL_TIME and wire_type == wire.FIXED64:
            (event.wall_time,) = struct.unpack("<d", data[a:b])
        elif number == _EVENT_STEP and wire_type == wire.VARINT:
            event.step = _signed(a)
        elif number == _EVENT_SUMMARY and wire_type == wire.LENGTH_DELIMITED and summary is None:
            summary = (a, b)
    event.mode_step = event.step
    if summary is None or not _decode_summary(event, data, *summary):
        raise wire.WireError("the event holds no tensor")
    return event


def _decode_usual_layout(event: TensorEvent, data: memoryview) -> bool:
    """Decode the layout smdebug and trainprobe write, without the general scanner.

    [wall_time] [step] summary{value{tag, tensor, [metadata]}}, each ending where its parent
    ends. Returns False, having decoded nothing for sure, when the message differs in any way;
    the general decoder then reads it.
    """
    end = len(data)
    position = 0
    try:
        if data[position] == 0x09:  # wall_time
            (wall_time,) = _DOUBLE.unpack_from(data, 1)
            position = 9
        else:
            wall_time = 0.0
        step = 0
        if data[position] == 0x10:  # step
            step, position = wire.read_varint(data, position + 1)
        for expected in (0x2A, 0x0A):  # summary, then its one value, running to the end
            if data[position] != expected:
                return False
            length, position = wire.read_varint(data, position + 1)
            if position + length != end:
                return False
        if data[position] != 0x0A:  # tag
            return False
        length, position = wire.read_varint(data, position + 1)
        name = bytes(data[position : position + length]).decode("utf-8")
        position += length
        if data[position] != 0x42:  # tensor
            return False
        length, position = wire.read_varint(data, position + 1)
        tensor_start, tensor_end = position, position + length
        metadata: tuple[int, int] | None = None
        if tensor_end != end:
            if data[tensor_end] != 0x4A:  # metadata
                return False
            length, position = wire.read_varint(data, tensor_end + 1)
            if position + length != end:
                return False
            metadata = (position, end)
    except (IndexError, struct.error, wire.WireError):
        return False
    event.wall_time, event.step, event.mode_step, event.name = wall_time, _signed(step), step, name
    _decode_tensor(event, data, tensor_start, tensor_end)
    if metadata is not None:
        _decode_metadata(event, data, *metadata)
    return True


def decode_tensor_value(payload: memoryview | bytes | bytearray) -> np.ndarray:
    """Just the tensor's value from an Event message: ``decode_tensor_event(...).value()``.

    The trial's hot path: for the layout smdebug and trainprobe write, it skips the name, the
    metadata and the event object.
    """
    data = memoryview(payload)
    try:
        position = 9 if data[0] == 0x09 else 0  # wall_time
        if data[position] == 0x10:  # step
            _, position = wire.read_varint(data, position + 1)
        # The keys of summary, its value, the tag and the tensor, each with its length: skip
        # them (and the tag's text), reading one- and two-byte lengths inline.
        for index, expected in enumerate(_USUAL_KEYS):
            if data[position] != expected:
                return decode_tensor_event(data).value()
            first = data[position + 1]
            if first < 0x80:
                length = first
                position += 2
            elif data[position + 2] < 0x80:
                length = (first & 0x7F) | (data[position + 2] << 7)
                position += 3
            else:
                length, position = wire.read_varint(data, position + 1)
            if index == 2:
                position += length  # the tag's text
    except (IndexError, wire.WireError):
        return decode_tensor_event(data).value()
    dtype_code = 0
    shape: tuple[int, ...] = ()
    content: memoryview | None = None
    try:
        fields = wire.scan(data, position, position + length)
    except (IndexError, wire.WireError):
        return decode_tensor_event(data).value()
    for number, _, a, b in fields:
        if number == _TENSOR_CONTENT:
            content = data[a:b]
        elif number == _TENSOR_DTYPE:
            dtype_code = a
        elif number == _TENSOR_SHAPE:
            shape = _decode_shape(data, a, b)
        else:  # strings or *_val numbers: the general path
            return decode_tensor_event(data).value()
    dtype = _NUMPY_DTYPES.get(dtype_code)
    if dtype is None or content is None:
        return decode_tensor_event(data).value()
    return np.frombuffer(content, dtype=dtype).reshape(shape)


def _decode_summary(event: TensorEvent, data: memoryview, start: int, stop: int) -> bool:
    for number, wire_type, a, b in wire.scan(data, start, stop):
        if number != _SUMMARY_VALUE or wire_type != wire.LENGTH_DELIMITED:
            continue
        has_tensor = False
        for value_number, value_type, value_a, value_b in wire.scan(data, a, b):
            if value_type != wire.LENGTH_DELIMITED:
                continue
            if value_number == _VALUE_TAG:
                event.name = _text(data, value_a, value_b)
            elif value_number == _VALUE_TENSOR:
                has_tensor = True
                _decode_tensor(event, data, value_a, value_b)
            elif value_number == _VALUE_METADATA:
                _decode_metadata(event, data, value_a, value_b)
        return has_tensor
    return False
