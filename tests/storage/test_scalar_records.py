"""The scalar fast path: a step's many 0-d tensors written at once, byte for byte as one by one.

The hook writes its reductions and losses at every step through ``encode_scalar_events`` and
``StepWriter.add_scalars``. Their bytes must be exactly those of the general encoder (which the
smdebug compatibility tests hold to smdebug's writer); the last test holds them to smdebug's
writer directly.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from index_checksums import without_checksums
from reference_envs import run_reference
from trainprobe.storage import protobuf_wire as wire
from trainprobe.storage import step_reader
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.scalar_records import encode_scalar_records
from trainprobe.storage.step_file import StepWriter
from trainprobe.storage.tensor_event import DTYPE_CODES, encode_scalar_events, encode_tensor_event
from trainprobe.storage.tfrecord import frame, frame_bytes, masked_crc32c, unframe

DTYPES = sorted(DTYPE_CODES)
NAMES = [
    "CrossEntropyLoss_output_0",
    "smdebug/reductions/abs_l2/gradient/Net_fc1.weight",
    "größe/ünïcode",
    "n" * 200,  # long enough for two-byte lengths
]


def values_for(dtype: str) -> np.ndarray:
    """Values every dtype holds exactly, plus the extremes its kind allows (as float64)."""
    kind = np.dtype(dtype).kind
    if kind in "fc":
        info = np.finfo(np.dtype(dtype))
        extremes = [float(info.max), float(info.min), float(info.tiny)]
        return np.array([0.0, -0.0, 1.0, -1.5, 0.1, np.inf, -np.inf, np.nan, *extremes])
    if kind == "b":
        return np.array([0.0, 1.0, -2.5, 0.25])
    info = np.iinfo(np.dtype(dtype))
    extremes = [float(info.min), float(info.max)] if info.bits < 64 else [float(info.min), 2**40]
    return np.array([0.0, 1.0, 7.0, 100.0, *extremes])


def general(name: str, value: np.ndarray, **options: object) -> bytes:
    return b"".join(encode_tensor_event(name, value, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", list(ModeKeys))
def test_scalar_events_equal_the_general_encoder(mode: ModeKeys) -> None:
    checked = 0
    for step, mode_step, wall_time, original in itertools.product(
        [0, 1, 127, 128, 2**40], [0, 3, 200], [0.0, 1.5, 1700000000.25], [None, "bfloat16"]
    ):
        for offset, dtype in enumerate(DTYPES):
            values = values_for(dtype)
            names = [NAMES[(index + offset) % len(NAMES)] for index in range(len(values))]
            options = {
                "step": step,
                "mode": mode,
                "mode_step": mode_step,
                "wall_time": wall_time,
                "original_dtype": original,
            }
            fast = encode_scalar_events(names, [dtype] * len(values), values, **options)  # type: ignore[arg-type]
            for name, value, payload in zip(names, values, fast, strict=True):
                assert payload == general(name, np.asarray(value, dtype=dtype), **options)
                checked += 1
    assert checked > 1000


def test_one_batch_may_mix_dtypes() -> None:
    values = np.array([0.5, 3.0, 1.0, -2.0, 1e300, 0.0, 42.0])
    dtypes = ["float32", "int64", "bool", "float64", "float64", "float16", "uint8"]
    names = [f"scalar/s{index}" for index in range(len(values))]
    options = {"step": 9, "mode": ModeKeys.EVAL, "mode_step": 4, "wall_time": 2.0}
    fast = encode_scalar_events(names, dtypes, values, **options)  # type: ignore[arg-type]
    for name, value, dtype, payload in zip(names, values, dtypes, fast, strict=True):
        assert payload == general(name, np.asarray(value, dtype=dtype), **options)


def test_a_dtype_that_cannot_be_saved_is_refused_as_by_the_general_encoder() -> None:
    options = {"step": 1, "mode": ModeKeys.TRAIN, "mode_step": 1, "wall_time": 1.0}
    refused = "datetime64[s]"
    with pytest.raises(TypeError, match="cannot be saved"):
        general("t", np.asarray(1, dtype=refused), **options)
    with pytest.raises(TypeError, match="cannot be saved"):
        encode_scalar_events(["ok", "t"], ["float32", refused], np.array([1.0, 1.0]), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", [ModeKeys.TRAIN, ModeKeys.EVAL])
def test_a_steps_records_from_the_kept_layout_equal_those_made_one_by_one(mode: ModeKeys) -> None:
    # Steps and mode steps cross the one- and two-byte varints and change their digits, so the
    # kept layouts are made again and reused; a batch of strings takes the record-by-record way.
    dtypes = [DTYPES[index % len(DTYPES)] for index in range(40)]
    names = [NAMES[index % len(NAMES)] + f"/{index}" for index in range(40)]
    rng = np.random.default_rng(0)
    checked = 0
    for step, original in itertools.product([0, 5, 127, 128, 9999, 2**40], [None, "bfloat16"]):
        values = rng.normal(size=len(names)) * 100
        for batch_names, batch_dtypes in [(names, dtypes), (["text", *names], ["str", *dtypes])]:
            options = {
                "step": step,
                "mode": mode,
                "mode_step": step // 3,
                "wall_time": 1700000000.0 + step,
                "original_dtype": original,
            }
            batch = np.concatenate([[7.0], values]) if batch_names[0] == "text" else values
            payloads = encode_scalar_events(batch_names, batch_dtypes, batch, **options)  # type: ignore[arg-type]
            kept = encode_scalar_records(batch_names, batch_dtypes, batch, **options)  # type: ignore[arg-type]
            assert kept.data == b"".join(frame_bytes(payload) for payload in payloads)
            assert kept.lengths == [len(frame_bytes(payload)) for payload in payloads]
            assert kept.checksums == [masked_crc32c(payload) for payload in payloads]
            checked += len(payloads)
    assert checked > 900


def test_frame_bytes_equals_the_general_framing() -> None:
    for length in [0, 1, 100, 127, 128, 300, 70000]:
        payload = bytes(range(256)) * (length // 256) + bytes(length % 256)
        record = frame_bytes(payload)
        assert record == b"".join(frame([payload]))
        assert bytes(unframe(record)) == payload


def test_varints_round_trip_at_every_seven_bit_boundary() -> None:
    for value in [0, 1, 127, 128, 255, 300, 16383, 16384, 2**35, 2**63 - 1, -1, -(2**40)]:
        encoded = wire.varint(value)
        decoded, end = wire.read_varint(encoded, 0)
        assert end == len(encoded)
        assert decoded == (value if value >= 0 else value + (1 << 64))
    assert [len(wire.varint(v)) for v in (127, 128, 16383, 16384, -1)] == [1, 2, 2, 3, 10]


def _expected_event_file(entries: list[tuple[str, np.ndarray]], **options: object) -> bytes:
    """The event file the general encoder and framing give for ``entries``, one by one."""
    records = [b"".join(frame(encode_tensor_event(n, a, **options))) for n, a in entries]  # type: ignore[arg-type]
    return b"".join(records)


def test_add_scalars_writes_the_records_add_would(tmp_path: Path) -> None:
    values = np.array([0.25, -3.0, 7.0, 1.0])
    dtypes = ["float32", "float64", "int32", "bool"]
    names = [f"smdebug/reductions/{op}/w" for op in ("mean", "min", "max", "l2")]
    writer = StepWriter(str(tmp_path), 12, "worker_0")
    writer.add("w", np.arange(6, dtype=np.float32).reshape(2, 3), mode=ModeKeys.TRAIN, mode_step=5)
    writer.add_scalars(names, dtypes, values, mode=ModeKeys.TRAIN, mode_step=5, wall_time=3.0)
    writer.add("loss", np.array(0.5, dtype=np.float32), mode=ModeKeys.TRAIN, mode_step=5)
    writer.close()

    index = step_reader.read_step_index(str(tmp_path), "index/000000000/000000000012_worker_0.json")
    assert [t.name for t in index.tensors] == ["w", *names, "loss"]
    event_file = tmp_path / "events/000000000012/000000000012_worker_0.tfevents"
    data = event_file.read_bytes()
    scalars = [(n, np.asarray(v, dtype=d)) for n, v, d in zip(names, values, dtypes, strict=True)]
    options = {"step": 12, "mode": ModeKeys.TRAIN, "mode_step": 5, "wall_time": 3.0}
    first, *middle, last = index.tensors
    assert data[first.start + first.length : last.start] == _expected_event_file(scalars, **options)
    assert [t.start for t in middle] == list(
        itertools.accumulate([first.length] + [t.length for t in middle[:-1]])
    )
    records = step_reader.read_tensor_records(
        str(tmp_path), index.event_file or "", [(t.start, t.length) for t in index.tensors]
    )
    read = {event.name: event.value() for event in records}
    for name, array in scalars:
        assert read[name].dtype == array.dtype and read[name].shape == ()
        assert read[name] == array
    assert read["loss"] == np.float32(0.5)


def test_a_refused_scalar_leaves_the_step_as_it_was(tmp_path: Path) -> None:
    writer = StepWriter(str(tmp_path), 1, "worker_0")
    writer.add("kept", np.array(1.0), mode=ModeKeys.TRAIN, mode_step=1)
    with pytest.raises(TypeError):
        writer.add_scalars(
            ["a", "b"], ["float32", "datetime64[s]"], np.ones(2), mode=ModeKeys.TRAIN, mode_step=1
        )
    writer.close()
    index = step_reader.read_step_index(str(tmp_path), "index/000000000/000000000001_worker_0.json")
    assert [t.name for t in index.tensors] == ["kept"]
    size = (tmp_path / "events/000000000001/000000000001_worker_0.tfevents").stat().st_size
    assert index.tensors[0].length == size


CASES = [
    ("smdebug/reductions/mean/Net_fc1.weight", "float32", 0.125),
    ("smdebug/reductions/abs_l2/gradient/Net_fc1.weight", "float64", 12.5),
    ("CrossEntropyLoss_output_0", "float32", 2.302585),
    ("scalar/count", "int64", -(2**40)),
    ("scalar/flag", "bool", 1.0),
    ("scalar/half", "float16", -0.5),
]


@pytest.mark.slow
def test_add_scalars_bytes_equal_smdebugs_writer(tmp_path: Path) -> None:
    smdebug_dir = tmp_path / "smdebug"
    steps = [(0, "TRAIN", 0), (7, "EVAL", 3), (123456, "PREDICT", 200)]
    wall_time = 1700000000.25
    run_reference(
        "smdebug",
        f"""
        import json
        import numpy as np
        from smdebug.core.modes import ModeKeys
        from smdebug.core.writer import FileWriter
        for step, mode, mode_step in {steps!r}:
            writer = FileWriter(trial_dir={str(smdebug_dir)!r}, step=step, worker="worker_0")
            for name, dtype, value in {CASES!r}:
                writer.write_tensor(tdata=np.asarray(value, dtype=dtype), tname=name,
                                    mode=ModeKeys[mode], mode_step=mode_step,
                                    timestamp={wall_time!r})
            writer.close()
        print(json.dumps("done"))
        """,
    )
    ours = tmp_path / "trainprobe"
    names, dtypes, values = zip(*CASES, strict=True)
    for step, mode, mode_step in steps:
        writer = StepWriter(str(ours), step, "worker_0")
        writer.add_scalars(
            names,
            dtypes,
            np.array(values, dtype=np.float64),
            mode=ModeKeys[mode],
            mode_step=mode_step,
            wall_time=wall_time,
        )
        writer.close()
    theirs = sorted(p.relative_to(smdebug_dir) for p in smdebug_dir.rglob("*") if p.is_file())
    mine = sorted(p.relative_to(ours) for p in ours.rglob("*") if p.is_file())
    assert mine == theirs
    for relative in theirs:
        mine_bytes = (ours / relative).read_bytes()
        if relative.suffix == ".json":
            mine_bytes = without_checksums(ours, mine_bytes)
        assert mine_bytes == (smdebug_dir / relative).read_bytes(), relative
    index = json.loads((ours / "index/000000000/000000000007_worker_0.json").read_text())
    assert [entry["tensorname"] for entry in index["tensor_payload"]] == list(names)
