"""TensorBoard event files, read back with the tensorboard package's own readers."""

from __future__ import annotations

import bisect
import math
import os
import re
import socket
import sys
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator, plugin_event_accumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util

from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.tensorboard_events import (
    TensorBoardWriter,
    default_bucket_limits,
    encode_scalar_event,
    histogram_of,
)
from trainprobe.storage.tfrecord import FAKE_DATA_CRC, RecordError, frame, iter_records

KEEP_ALL = {event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0}


def _run(directory: Path) -> event_accumulator.EventAccumulator:
    accumulator = event_accumulator.EventAccumulator(str(directory), size_guidance=KEEP_ALL)
    accumulator.Reload()
    return accumulator


def _only_file(directory: Path) -> Path:
    (path,) = directory.iterdir()
    return path


def _scalars(run: event_accumulator.EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(event.step, event.value) for event in run.Scalars(tag)]


def test_each_file_opens_with_the_file_version_event(tmp_path: Path) -> None:
    writer = TensorBoardWriter(str(tmp_path))
    writer.add_scalar(ModeKeys.TRAIN, "loss", 1.0, step=0)
    writer.close()
    events = list(EventFileLoader(str(_only_file(tmp_path / "TRAIN"))).Load())
    assert events[0].file_version == "brain.Event:2"
    assert not events[0].HasField("summary")
    assert _run(tmp_path / "TRAIN").file_version == 2.0


def test_scalars_are_read_back_per_mode_with_their_global_steps(tmp_path: Path) -> None:
    writer = TensorBoardWriter(str(tmp_path))
    train = {0: 0.0, 2: 2.5, 4: -1.25, 6: 1e-3}  # 0.0 must still be a scalar (a oneof field)
    evaluation = {3: 0.75, 7: 0.5}
    for step in sorted({*train, *evaluation}):
        if step in train:
            writer.add_scalar(ModeKeys.TRAIN, "CrossEntropyLoss_output_0", train[step], step=step)
        if step in evaluation:
            writer.add_scalar(
                ModeKeys.EVAL, "CrossEntropyLoss_output_0", evaluation[step], step=step
            )
    writer.close()

    assert sorted(p.name for p in tmp_path.iterdir()) == ["EVAL", "TRAIN"]
    for mode, expected in (("TRAIN", train), ("EVAL", evaluation)):
        run = _run(tmp_path / mode)
        assert run.Tags()["scalars"] == ["CrossEntropyLoss_output_0"]
        assert _scalars(run, "CrossEntropyLoss_output_0") == [
            (step, float(np.float32(value))) for step, value in sorted(expected.items())
        ]


def test_default_buckets_are_tensorflows(tmp_path: Path) -> None:
    # TF's default histogram: limits grow by 10% from 1e-12 while below 1e20, mirrored for
    # negative values, with 0 in the middle and -DBL_MAX / DBL_MAX at the ends.
    limits = default_bucket_limits()
    middle = len(limits) // 2
    assert limits[0] == -sys.float_info.max and limits[-1] == sys.float_info.max
    assert limits[middle] == 0.0
    assert limits[middle + 1] == 1e-12
    assert np.array_equal(limits[:middle], -limits[middle + 1 :][::-1])
    positive = limits[middle + 1 : -1]
    assert np.allclose(positive[1:] / positive[:-1], 1.1)
    assert positive[-1] < 1e20 <= positive[-1] * 1.1
    assert len(positive) == math.ceil(math.log(1e32) / math.log(1.1))


def _expected_counts(values: list[float]) -> dict[float, int]:
    """Per default bucket limit, how many values fall below it and at or above the one before."""
    limits = list(default_bucket_limits())
    counts: dict[float, int] = {}
    for value in values:
        limit = limits[bisect.bisect_right(limits, value)]
        counts[limit] = counts.get(limit, 0) + 1
    return counts


def test_histograms_hold_the_values_statistics_and_bucket_counts(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    values = np.concatenate(
        [
            rng.normal(0.0, 0.05, 500),
            [0.0, 0.0, 1e-13, -1e-13, 1e-12, 3.0, -40000.0, 7e18],
        ]
    ).astype(np.float32)
    writer = TensorBoardWriter(str(tmp_path))
    histogram = histogram_of(values)
    assert histogram is not None
    writer.add_histogram(ModeKeys.TRAIN, "weights/fc1.weight", histogram, step=10)
    writer.close()

    run = _run(tmp_path / "TRAIN")
    assert run.Tags()["histograms"] == ["weights/fc1.weight"]
    (event,) = run.Histograms("weights/fc1.weight")
    assert event.step == 10
    read = event.histogram_value
    as_double = values.astype(np.float64)
    assert read.min == as_double.min() and read.max == as_double.max()
    assert read.num == len(values)
    assert read.sum == pytest.approx(as_double.sum())
    assert read.sum_squares == pytest.approx((as_double**2).sum())
    limits = list(read.bucket_limit)
    counts = list(read.bucket)
    assert sum(counts) == len(values)
    assert limits == sorted(limits) and set(limits) <= set(default_bucket_limits())
    non_empty = {limit: count for limit, count in zip(limits, counts, strict=True) if count}
    assert non_empty == _expected_counts(as_double.tolist())
    # Runs of empty buckets are collapsed into one, as TensorFlow encodes them.
    assert all(counts[i] or counts[i + 1] for i in range(len(counts) - 1))


def test_histograms_leave_out_values_that_are_not_finite(tmp_path: Path) -> None:
    values = np.array([np.nan, np.inf, -np.inf, 1.0, 2.0])
    histogram = histogram_of(values)
    assert histogram is not None
    assert (histogram.num, histogram.min, histogram.max, histogram.sum) == (2.0, 1.0, 2.0, 3.0)
    assert histogram_of(np.array([np.nan, np.inf])) is None
    with pytest.raises(TypeError):
        histogram_of(np.array([True, False]))


def test_integer_tensors_make_histograms_too() -> None:
    histogram = histogram_of(np.arange(-3, 4, dtype=np.int64).reshape(7, 1))
    assert histogram is not None
    assert (histogram.num, histogram.min, histogram.max, histogram.sum) == (7.0, -3.0, 3.0, 0.0)
    assert histogram.sum_squares == 28.0


def test_tensorboards_histogram_plugin_reads_them(tmp_path: Path) -> None:
    # The path the TensorBoard UI takes: histo summaries migrated into [left, right, count].
    values = np.linspace(-2.0, 5.0, 300)
    writer = TensorBoardWriter(str(tmp_path))
    histogram = histogram_of(values)
    assert histogram is not None
    writer.add_histogram(ModeKeys.TRAIN, "weights/w", histogram, step=1)
    writer.add_scalar(ModeKeys.TRAIN, "loss", 0.25, step=1)
    writer.close()
    run = plugin_event_accumulator.EventAccumulator(str(tmp_path / "TRAIN"))
    run.Reload()
    assert run.SummaryMetadata("weights/w").plugin_data.plugin_name == "histograms"
    assert run.SummaryMetadata("loss").plugin_data.plugin_name == "scalars"
    buckets = tensor_util.make_ndarray(run.Tensors("weights/w")[0].tensor_proto)
    assert buckets.shape[1] == 3
    assert buckets[:, 2].sum() == len(values)
    assert buckets[0, 0] == -2.0 and buckets[-1, 1] == 5.0
    assert tensor_util.make_ndarray(run.Tensors("loss")[0].tensor_proto) == np.float32(0.25)


def test_every_record_carries_its_real_crc(tmp_path: Path) -> None:
    writer = TensorBoardWriter(str(tmp_path))
    histogram = histogram_of(np.arange(100.0))
    assert histogram is not None
    for step in range(3):
        writer.add_scalar(ModeKeys.GLOBAL, "loss", step / 3, step=step)
        writer.add_histogram(ModeKeys.GLOBAL, "weights/w", histogram, step=step)
    writer.close()
    data = _only_file(tmp_path / "GLOBAL").read_bytes()
    records = list(iter_records(data))
    assert len(records) == 7  # file_version + 3 steps x 2
    for start, length, _ in records:
        assert int.from_bytes(data[start + length - 4 : start + length], "little") != FAKE_DATA_CRC


def test_a_corrupted_byte_is_caught_by_both_readers(tmp_path: Path) -> None:
    writer = TensorBoardWriter(str(tmp_path))
    for step in range(4):
        writer.add_scalar(ModeKeys.TRAIN, "loss", 1.0 + step, step=step)
    writer.close()
    path = _only_file(tmp_path / "TRAIN")
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x01  # the last byte of the last record's payload (inside its float value)
    path.write_bytes(bytes(data))

    with pytest.raises(RecordError):
        list(iter_records(data))
    # TensorBoard's reader checks the CRC too and stops before the damaged record.
    assert _scalars(_run(tmp_path / "TRAIN"), "loss") == [(0, 1.0), (1, 2.0), (2, 3.0)]


def test_a_step_is_written_whole_once_the_next_one_starts(tmp_path: Path) -> None:
    writer = TensorBoardWriter(str(tmp_path))
    writer.add_scalar(ModeKeys.TRAIN, "loss", 1.0, step=0)
    writer.add_scalar(ModeKeys.TRAIN, "accuracy", 0.5, step=0)
    assert not (tmp_path / "TRAIN").exists()  # nothing is written in the middle of a step
    writer.add_scalar(ModeKeys.TRAIN, "loss", 2.0, step=1)
    path = tmp_path / "TRAIN" / Path(writer.paths()[ModeKeys.TRAIN]).name
    assert len(list(iter_records(path.read_bytes()))) == 3
    assert _scalars(_run(tmp_path / "TRAIN"), "loss") == [(0, 1.0)]
    writer.flush()
    assert _scalars(_run(tmp_path / "TRAIN"), "loss") == [(0, 1.0), (1, 2.0)]
    writer.close()
    writer.close()
    assert writer.bytes_written == os.path.getsize(path)


def test_tensorboard_reads_a_half_written_record_once_it_is_complete(tmp_path: Path) -> None:
    # What a reader sees if it catches an append half-way: the record is "not there yet".
    writer = TensorBoardWriter(str(tmp_path))
    writer.add_scalar(ModeKeys.TRAIN, "loss", 1.0, step=0)
    writer.close()
    path = _only_file(tmp_path / "TRAIN")
    record = b"".join(
        frame([encode_scalar_event("loss", 2.0, step=1, wall_time=5.0)], real_crc=True)
    )
    with open(path, "ab") as file:
        file.write(record[:10])
    run = event_accumulator.EventAccumulator(str(tmp_path / "TRAIN"), size_guidance=KEEP_ALL)
    run.Reload()
    assert _scalars(run, "loss") == [(0, 1.0)]
    with open(path, "ab") as file:
        file.write(record[10:])
    run.Reload()
    assert _scalars(run, "loss") == [(0, 1.0), (1, 2.0)]


def test_files_are_named_as_tensorflow_names_them_and_never_overwritten(tmp_path: Path) -> None:
    first, second = TensorBoardWriter(str(tmp_path)), TensorBoardWriter(str(tmp_path))
    for value, writer in ((1.0, first), (2.0, second)):
        writer.add_scalar(ModeKeys.TRAIN, "loss", value, step=int(value))
        writer.close()
    names = sorted(p.name for p in (tmp_path / "TRAIN").iterdir())
    assert len(names) == 2
    pattern = rf"events\.out\.tfevents\.\d{{10}}\.{re.escape(socket.gethostname())}\.{os.getpid()}"
    assert all(re.fullmatch(pattern + r"(\.\d+)?", name) for name in names)
    assert _scalars(_run(tmp_path / "TRAIN"), "loss") == [(1, 1.0), (2, 2.0)]


def test_an_unwritable_log_dir_raises_oserror(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    writer = TensorBoardWriter(str(blocker / "tensorboard"))
    writer.add_scalar(ModeKeys.TRAIN, "loss", 1.0, step=0)
    with pytest.raises(OSError):
        writer.flush()
