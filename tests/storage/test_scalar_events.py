"""Records read together are decoded together (``scalar_events.record_values``), and the result is
always that of decoding each record alone: same values, dtypes and shapes, same refusals. The
records are those trainprobe's writer makes (every dtype, steps of one to five varint bytes, long
names), a scalar laid out as smdebug's protobuf writes one (no shape field, no metadata), tensors
with dimensions and strings, and damaged ones."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from trainprobe.storage import protobuf_wire as wire
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.scalar_events import record_values
from trainprobe.storage.tensor_event import (
    DTYPE_CODES,
    decode_tensor_value,
    encode_scalar_events,
    encode_tensor_event,
)
from trainprobe.storage.tfrecord import (
    RecordChecksumError,
    RecordError,
    frame,
    frame_bytes,
    masked_crc32c,
    unframe,
)

NAMES = ["CrossEntropyLoss_output_0", "größe/ünïcode", "n" * 200]


def _scalar_records(step: int) -> list[tuple[bytes, int | None]]:
    """A step's scalars of every dtype as trainprobe writes them, with their index checksums."""
    found = []
    for dtype, name in zip(sorted(DTYPE_CODES), itertools.cycle(NAMES), strict=False):
        value = np.asarray(np.iinfo(dtype).max if np.dtype(dtype).kind in "iu" else 1.5, dtype)
        [payload] = encode_scalar_events(
            [name],
            [dtype],
            value.reshape(1),
            step=step,
            mode=ModeKeys.EVAL,
            mode_step=step // 2,
            wall_time=1.25,
        )
        found.append((frame_bytes(payload), masked_crc32c(payload)))
    return found


def _smdebug_scalar(name: str, value: float, step: int) -> bytes:
    """A float32 scalar as protobuf writes smdebug's: no shape field, no metadata."""
    tensor = wire.varint_field(1, 1) + wire.message_field(4, np.float32(value).tobytes())
    summary_value = wire.message_field(1, name.encode()) + wire.message_field(8, tensor)
    payload = (
        wire.double_field(1, 2.5)
        + wire.varint_field(2, step)
        + wire.message_field(5, wire.message_field(1, summary_value))
    )
    return frame_bytes(payload)


def _others() -> list[tuple[bytes, int | None]]:
    matrix = encode_tensor_event(
        "fc.weight",
        np.arange(6, dtype=np.float32).reshape(2, 3),
        step=3,
        mode=ModeKeys.TRAIN,
        mode_step=3,
        wall_time=1.0,
    )
    strings = encode_tensor_event(
        "labels", np.array(["a", "bc"]), step=3, mode=ModeKeys.TRAIN, mode_step=3, wall_time=1.0
    )
    one_element = encode_tensor_event(
        "shaped",
        np.array([7.0], np.float64),
        step=3,
        mode=ModeKeys.TRAIN,
        mode_step=3,
        wall_time=1.0,
    )
    real_footer = encode_tensor_event(
        "tb", np.array(0.5, np.float32), step=3, mode=ModeKeys.TRAIN, mode_step=3, wall_time=1.0
    )
    return [
        (b"".join(bytes(chunk) for chunk in frame(matrix)), None),
        (b"".join(bytes(chunk) for chunk in frame(strings)), None),
        (b"".join(bytes(chunk) for chunk in frame(one_element)), None),
        (b"".join(bytes(chunk) for chunk in frame(real_footer, real_crc=True)), None),
        (_smdebug_scalar("smdebug_loss", 0.75, 9), None),
        (_smdebug_scalar("smdebug_loss", -3.0, 2**34), None),
    ]


def _read_together(records: list[tuple[bytes, int | None]], gap: bytes = b"") -> list[np.ndarray]:
    span = bytearray()
    starts, lengths = [], []
    for record, _ in records:
        span += gap
        starts.append(len(span))
        lengths.append(len(record))
        span += record
    return record_values(memoryview(span), starts, lengths, [c for _, c in records])


def _read_alone(records: list[tuple[bytes, int | None]]) -> list[np.ndarray]:
    return [
        decode_tensor_value(unframe(bytearray(record), checksum=checksum))
        for record, checksum in records
    ]


@pytest.mark.parametrize("step", [0, 127, 300, 70_000, 2**30])
def test_records_read_together_equal_records_read_alone(step: int) -> None:
    records = _scalar_records(step) + _others() + _scalar_records(step + 1)
    for gap in (b"", b"\0" * 5):
        together, alone = _read_together(records, gap), _read_alone(records)
        assert len(together) == len(alone)
        for mine, theirs in zip(together, alone, strict=True):
            assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
            assert np.array_equal(mine, theirs)


def test_a_damaged_record_among_good_ones_is_refused_as_alone() -> None:
    records = _scalar_records(5)
    record, checksum = records[3]
    changed = bytearray(record)
    changed[-6] ^= 0xFF  # the value's last byte
    damaged = [*records[:3], (bytes(changed), checksum), *records[4:]]
    with pytest.raises(RecordChecksumError):
        _read_alone(damaged)
    with pytest.raises(RecordChecksumError):
        _read_together(damaged)

    header = bytearray(record)
    header[9] ^= 0x01  # the length's CRC
    with pytest.raises(RecordError, match="length CRC"):
        _read_together([*records[:3], (bytes(header), checksum)])
