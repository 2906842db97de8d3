"""The index file of one (global step, worker): where each tensor's record lies in the event file.

smdebug's JSON, written once when the step's writer closes::

    {"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": "events/.../....tfevents"},
     "tensor_payload": [{"tensorname": "...", "start_idx": 0, "length": 5254}, ...],
     "shape_payload": [{"tensorname": "...", "originalname": "...", "shape": [64, 20]}]}

``start_idx`` and ``length`` cover the whole record, framing included, so one ranged read
fetches one tensor. A step that saved only shapes has no ``event_file_name``.

A tensor of a sharded training (FSDP, tensor parallelism) is saved by each worker as the piece it
holds; trainprobe adds a ``"shard_payload"`` that says where each piece lies in the full tensor::

    "shard_payload": [{"tensorname": "Net_fc1.weight", "shape": [64, 20], "offsets": [32, 0]},
                      {"tensorname": "Net_fc2.bias", "shape": [10], "offsets": [0], "sum": true},
                      {"tensorname": "fc.weight", "shape": [64, 20], "flat_offset": 640}]

``offsets`` place a piece of the full ``shape`` (its own shape is the record's); with ``"sum"``
the full tensor is the sum of such pieces (a partial gradient of tensor parallelism), not their
union; ``flat_offset`` places a 1-D piece in the full tensor laid out flat (FSDP's flat
parameters). smdebug's reader ignores the key and sees each worker's piece.

trainprobe adds ``"masked_crc32c"`` to each tensor entry: the masked CRC32C of the record's
payload, which TensorFlow's framing would put in the record's footer (``tfrecord``). smdebug's
reader ignores the key; trainprobe's checks the record against it. Entries without it (smdebug's
output, trainprobe's before it) are read unverified.

Decoding is strict: anything that is not such a document (truncated JSON, nesting too deep to
parse, a field of the wrong type, an ``event_file_name`` that leaves the output directory)
raises IndexFileError, so that a reader can drop that one step and read the others.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, overload

from trainprobe.errors import FormatError
from trainprobe.storage.modes import ModeKeys

__all__ = [
    "CHECKSUM_KEY",
    "IndexFileError",
    "ShapeEntry",
    "ShardEntry",
    "StepIndex",
    "TensorColumns",
    "TensorLocation",
    "check_relative_path",
    "decode_index",
    "encode_index",
]

CHECKSUM_KEY = "masked_crc32c"


class IndexFileError(FormatError, ValueError):
    """An index file that is damaged, or not an index file, or names a file outside its output."""


class TensorLocation(NamedTuple):
    """Where one tensor's record is in the step's event file (a step holds thousands: a tuple
    is made fastest)."""

    name: str
    start: int
    length: int
    checksum: int | None = None


class TensorColumns(Sequence[TensorLocation]):
    """A step's tensor locations as its writer gathers them, column by column: the thousands of
    scalars a step are added as four list extensions, not as a tuple each."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.starts: list[int] = []
        self.lengths: list[int] = []
        self.checksums: list[int | None] = []

    def append(self, location: TensorLocation) -> None:
        """Add one location."""
        self.extend([location.name], [location.start], [location.length], [location.checksum])

    def extend(
        self,
        names: Iterable[str],
        starts: Iterable[int],
        lengths: Iterable[int],
        checksums: Iterable[int | None],
    ) -> None:
        """Add locations given column by column."""
        self.names.extend(names)
        self.starts.extend(starts)
        self.lengths.extend(lengths)
        self.checksums.extend(checksums)

    def __len__(self) -> int:
        return len(self.names)

    @overload
    def __getitem__(self, index: int) -> TensorLocation: ...

    @overload
    def __getitem__(self, index: slice) -> list[TensorLocation]: ...

    def __getitem__(self, index: int | slice) -> TensorLocation | list[TensorLocation]:
        if isinstance(index, slice):
            return list(
                map(
                    TensorLocation,
                    self.names[index],
                    self.starts[index],
                    self.lengths[index],
                    self.checksums[index],
                )
            )
        return TensorLocation(
            self.names[index], self.starts[index], self.lengths[index], self.checksums[index]
        )


@dataclass(frozen=True)
class ShapeEntry:
    """A tensor's shape, saved without its values (``save_shape``)."""

    name: str
    original_name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ShardEntry:
    """Where the piece of a sharded tensor that one worker saved lies in the full tensor."""

    name: str
    shape: tuple[int, ...]
    """The full tensor's shape."""
    offsets: tuple[int, ...] | None = None
    """Where the piece starts along each dimension (a piece of the same rank)."""
    flat_offset: int | None = None
    """Where a 1-D piece starts in the full tensor laid out flat (instead of ``offsets``)."""
    summed: bool = False
    """Whether the full tensor is the sum of the pieces (not their union)."""

    def to_json(self) -> dict[str, Any]:
        """The entry as the index holds it."""
        entry: dict[str, Any] = {"tensorname": self.name, "shape": list(self.shape)}
        if self.offsets is not None:
            entry["offsets"] = list(self.offsets)
        if self.flat_offset is not None:
            entry["flat_offset"] = self.flat_offset
        if self.summed:
            entry["sum"] = True
        return entry


@dataclass
class StepIndex:
    """The content of one index file."""

    step: int
    worker: str
    mode: ModeKeys
    mode_step: int
    event_file: str | None
    tensors: Sequence[TensorLocation] = field(default_factory=list)
    shapes: list[ShapeEntry] = field(default_factory=list)
    shards: list[ShardEntry] = field(default_factory=list)


def encode_index(index: StepIndex) -> bytes:
    """The JSON bytes of an index file, in smdebug's key order."""
    meta: dict[str, Any] = {"mode": index.mode.name, "mode_step": index.mode_step}
    if index.event_file is not None:
        meta["event_file_name"] = index.event_file
    shapes = [
        {"tensorname": s.name, "originalname": s.original_name, "shape": list(s.shape)}
        for s in index.shapes
    ]
    shards = (
        f', "shard_payload": {json.dumps([s.to_json() for s in index.shards])}'
        if index.shards
        else ""
    )
    return (
        f'{{"meta": {json.dumps(meta)}, "tensor_payload": [{_entries(index.tensors)}], '
        f'"shape_payload": {json.dumps(shapes)}{shards}}}'
    ).encode()


def _entries(tensors: Sequence[TensorLocation]) -> str:
    """json.dumps's text of the tensor entries (a step may hold thousands): the numbers put
    into the text kept for the step's names and lengths, which recur from step to step."""
    if not tensors:
        return ""
    names: Sequence[str]
    starts: Sequence[int]
    lengths: Sequence[int]
    checksums: Sequence[int | None]
    if isinstance(tensors, TensorColumns):
        names, starts, lengths, checksums = (
            tensors.names,
            tensors.starts,
            tensors.lengths,
            tensors.checksums,
        )
    else:
        names, starts, lengths, checksums = zip(*tensors, strict=True)
    if None in checksums:
        return ", ".join(
            f"{_entry_head(name)}{start}, {_LENGTH}{length}"
            + ("}" if checksum is None else f", {_CHECKSUM}{checksum}}}")
            for name, start, length, checksum in zip(names, starts, lengths, checksums, strict=True)
        )
    numbers: list[int | None] = [0] * (2 * len(tensors))
    numbers[0::2] = starts
    numbers[1::2] = checksums
    return _entries_text(tuple(names), tuple(lengths)) % tuple(numbers)


_LENGTH = '"length": '
_CHECKSUM = f"{json.dumps(CHECKSUM_KEY)}: "
_KEPT_TEXTS = 16
_texts: dict[tuple[tuple[str, ...], tuple[int, ...]], str] = {}


def _entries_text(names: tuple[str, ...], lengths: tuple[int, ...]) -> str:
    """The entries of ``names`` and ``lengths`` with checksums, ``%d`` for each start and
    checksum."""
    key = (names, lengths)
    text = _texts.get(key)
    if text is None:
        if len(_texts) >= _KEPT_TEXTS:
            _texts.clear()
        text = _texts[key] = ", ".join(
            _entry_head(name).replace("%", "%%") + f"%d, {_LENGTH}{length}, {_CHECKSUM}%d}}"
            for name, length in zip(names, lengths, strict=True)
        )
    return text


@lru_cache(maxsize=1 << 16)
def _entry_head(name: str) -> str:
    return f'{{"tensorname": {json.dumps(name)}, "start_idx": '


def check_relative_path(path: object, what: str = "event_file_name") -> str:
    """``path`` when it is a relative ``/``-separated path that stays inside its directory.

    Refuses (IndexFileError) anything else: not a string, empty, absolute, a URL, a NUL, a
    backslash, or ``..`` leading out. Symbolic links are the reader's to check.
    """
    if not isinstance(path, str) or not path:
        raise IndexFileError(f"{what} must be a relative path, found {path!r}")
    normal = posixpath.normpath(path)
    if (
        "\0" in path
        or "\\" in path
        or "://" in path
        or posixpath.isabs(path)
        or normal == ".."
        or normal.startswith("../")
        or normal == "."
    ):
        raise IndexFileError(f"{what} {path!r} is not a path inside the tensor output")
    return normal


def _whole_number(value: object, what: str, limit: int = 2**63) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        raise IndexFileError(f"{what} must be a whole number from 0, found {value!r}")
    return value


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise IndexFileError(f"{what} must be a string, found {value!r}")
    return value


def _location(entry: object) -> TensorLocation:
    # The usual entry, checked in one expression (``type(...) is int`` leaves bools out); any
    # other goes through the checks that say what is wrong.
    if type(entry) is dict:
        name, start, length = entry.get("tensorname"), entry.get("start_idx"), entry.get("length")
        checksum = entry.get(CHECKSUM_KEY)
        if (
            type(name) is str
            and type(start) is int
            and type(length) is int
            and start >= 0
            and length >= 0
            and (checksum is None or (type(checksum) is int and 0 <= checksum < 2**32))
        ):
            return TensorLocation(name, start, length, checksum)
    if not isinstance(entry, dict):
        raise IndexFileError(f"a tensor_payload entry must be an object, found {entry!r}")
    checksum = entry.get(CHECKSUM_KEY)
    return TensorLocation(
        _text(entry["tensorname"], "tensorname"),
        _whole_number(entry["start_idx"], "start_idx"),
        _whole_number(entry["length"], "length"),
        None if checksum is None else _whole_number(checksum, CHECKSUM_KEY, 2**32),
    )


def _shape(entry: object) -> ShapeEntry:
    if not isinstance(entry, dict):
        raise IndexFileError(f"a shape_payload entry must be an object, found {entry!r}")
    name = _text(entry["tensorname"], "tensorname")
    shape = entry["shape"]
    if not isinstance(shape, list):
        raise IndexFileError(f"shape must be a list, found {shape!r}")
    return ShapeEntry(
        name,
        _text(entry.get("originalname", name), "originalname"),
        tuple(_whole_number(size, "a shape's size") for size in shape),
    )


def _shard(entry: object) -> ShardEntry:
    if not isinstance(entry, dict):
        raise IndexFileError(f"a shard_payload entry must be an object, found {entry!r}")
    shape = entry["shape"]
    offsets = entry.get("offsets")
    flat_offset = entry.get("flat_offset")
    if not isinstance(shape, list) or not (offsets is None or isinstance(offsets, list)):
        raise IndexFileError(f"a shard's shape and offsets must be lists, found {entry!r}")
    if (offsets is None) == (flat_offset is None):
        raise IndexFileError(f"a shard needs either offsets or flat_offset, found {entry!r}")
    if offsets is not None and len(offsets) != len(shape):
        raise IndexFileError(f"a shard's offsets must match its shape's rank, found {entry!r}")
    return ShardEntry(
        _text(entry["tensorname"], "tensorname"),
        tuple(_whole_number(size, "a shape's size") for size in shape),
        None if offsets is None else tuple(_whole_number(o, "an offset") for o in offsets),
        None if flat_offset is None else _whole_number(flat_offset, "flat_offset"),
        entry.get("sum") is True,
    )


def decode_index(data: bytes, step: int, worker: str) -> StepIndex:
    """An index file's content; ``step`` and ``worker`` come from its file name.

    Raises IndexFileError (a ValueError) when it is not a whole, well-formed index file.
    """
    try:
        document = json.loads(data)
    except RecursionError:
        raise IndexFileError("not an index file: JSON nested too deeply") from None
    except ValueError as error:  # truncated or not JSON, or not UTF-8
        raise IndexFileError(f"not an index file: {error}") from None
    try:
        if not isinstance(document, dict):
            raise IndexFileError(f"an index file is a JSON object, found {type(document).__name__}")
        meta = document["meta"]
        if not isinstance(meta, dict):
            raise IndexFileError(f"meta must be an object, found {meta!r}")
        mode_name = _text(meta.get("mode", "GLOBAL"), "mode")
        mode = ModeKeys[mode_name.strip().rsplit(".", 1)[-1]]
        event_file = meta.get("event_file_name")
        tensors = document.get("tensor_payload") or []
        shapes = document.get("shape_payload") or []
        shards = document.get("shard_payload") or []
        if not all(isinstance(part, list) for part in (tensors, shapes, shards)):
            raise IndexFileError("tensor_payload, shape_payload and shard_payload must be lists")
        return StepIndex(
            step=step,
            worker=worker,
            mode=mode,
            mode_step=_whole_number(meta.get("mode_step", step), "mode_step"),
            event_file=None if event_file is None else check_relative_path(event_file),
            tensors=[_location(entry) for entry in tensors],
            shapes=[_shape(entry) for entry in shapes],
            shards=[_shard(entry) for entry in shards],
        )
    except KeyError as error:
        raise IndexFileError(f"not an index file: {error} is missing or unknown") from None
