"""The writer thread keeps the scalars it writes as chunks beside the step files: what a reader
gets from them is exactly what the trial reads from the step files (several workers, modes, a
resumed output), and a chunk that cannot be written or read costs nothing but the shortcut."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest

from trainprobe.analysis.scalar_series import ScalarSeries
from trainprobe.capture.writer_thread import (
    CollectionsJob,
    EndStep,
    ScalarBatch,
    TensorRecord,
    WriterThread,
)
from trainprobe.storage import files, locations, written_scalars
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.reduction_names import reduction_tensor_name
from trainprobe.storage.written_scalars import read_written_scalars
from trainprobe.trials import create_trial
from trial_scalars import Series, trial_scalars

CHUNK = 100
COLLECTIONS = {"losses": {"include_regex": ["loss"], "tensor_names": [], "save_config": None}}


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(written_scalars, "CHUNK_STEPS", CHUNK)


def _mode(step: int) -> ModeKeys:
    return ModeKeys.EVAL if step % 5 == 4 else ModeKeys.TRAIN


def _write_to(out: str, steps: range) -> WriterThread:
    return _write(out, "worker_0", steps, seed=1)


def _write(
    out: Path | str,
    worker: str,
    steps: range,
    *,
    seed: int,
    num_workers: int = 1,
    skip: int = -1,
) -> WriterThread:
    """``worker`` writes a loss (float32), a count (int64), a weight (not a scalar) and the
    loss's reductions at each of ``steps``; at step ``skip`` the loss and its reductions are
    missing."""
    rng = np.random.default_rng(seed)
    writer = WriterThread(str(out), worker)
    writer.submit(CollectionsJob(COLLECTIONS, num_workers))
    for step in steps:
        mode = _mode(step)
        if step != skip:
            loss = np.asarray(rng.normal(), dtype=np.float32)
            writer.submit(TensorRecord(step, "loss", loss, mode, step, 1.0))
        count = np.asarray([step * 3 + seed], dtype=np.int64)
        writer.submit(TensorRecord(step, "count", count, mode, step, 1.0))
        writer.submit(TensorRecord(step, "weight", rng.normal(size=4), mode, step, 1.0))
        names = [reduction_tensor_name("max", "loss", False), "scalar/ratio"][step == skip :]
        values = np.array([9.0, 1 / (step + 3)])[step == skip :]
        dtypes = ["float32"] * len(names)
        writer.submit(ScalarBatch(step, names, dtypes, values, mode, step, 1.0))
        writer.submit(EndStep(step))
    return writer


def _read_series(out: Path | str) -> Series:
    chunk = read_written_scalars(str(out))
    assert chunk is not None
    return {key: (s.tolist(), v.tolist()) for key, (s, v) in chunk.series.items()}


def _chunks(out: Path, worker: str) -> list[str]:
    return sorted(os.listdir(out / locations.scalar_chunks_dir(worker)))


def test_the_kept_scalars_are_the_trials_in_every_mode_without_reductions(tmp_path: Path) -> None:
    writer = _write(tmp_path, "worker_0", range(250), seed=1)
    writer.close()
    assert _chunks(tmp_path, "worker_0") == [
        "000000000000-000000000099.chunk",
        "000000000100-000000000199.chunk",
        "000000000200-000000000249.chunk",  # the rest, when the writer closed
    ]
    expected = trial_scalars(tmp_path)
    assert set(expected) == {
        (name, mode) for name in ("loss", "count", "scalar/ratio") for mode in ("TRAIN", "EVAL")
    }
    assert _read_series(tmp_path) == expected


def test_several_workers_give_the_first_workers_value_at_the_steps_all_wrote(
    tmp_path: Path,
) -> None:
    # worker_1 also writes step 130, which worker_0 never does: it is not a complete step; at
    # step 17 worker_0 has no loss, so the trial takes worker_1's.
    first = _write(tmp_path, "worker_0", range(130), seed=1, num_workers=2, skip=17)
    second = _write(tmp_path, "worker_1", range(131), seed=2, num_workers=2)
    first.close()
    second.close()
    expected = trial_scalars(tmp_path)
    assert 17 in expected[("loss", "TRAIN")][0] and 130 not in expected[("loss", "EVAL")][0]
    assert _read_series(tmp_path) == expected


def test_a_worker_without_chunks_yet_leaves_every_step_to_the_files(tmp_path: Path) -> None:
    _write(tmp_path, "worker_0", range(120), seed=1, num_workers=2).close()
    assert read_written_scalars(str(tmp_path)) is None  # worker_1 has written nothing yet


def test_a_resumed_output_goes_on_from_the_chunks_before(tmp_path: Path) -> None:
    _write(tmp_path, "worker_0", range(150), seed=1).close()
    _write(tmp_path, "worker_0", range(150, 320), seed=2).close()
    assert _chunks(tmp_path, "worker_0")[1:3] == [
        "000000000100-000000000149.chunk",
        "000000000150-000000000249.chunk",
    ]
    assert _read_series(tmp_path) == trial_scalars(tmp_path)


def test_a_step_written_again_after_its_chunk_removes_that_chunk_and_ends_the_chunks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write(tmp_path, "worker_0", range(150), seed=1).close()
    with caplog.at_level(logging.INFO, logger="trainprobe"):
        _write(tmp_path, "worker_0", range(120, 400), seed=2).close()
    assert "written again after its chunk" in caplog.text
    # The chunk holding steps 100-149 went: the files of 120-149 hold other values now.
    assert _chunks(tmp_path, "worker_0") == ["000000000000-000000000099.chunk"]
    series = ScalarSeries(output=str(tmp_path))
    assert series.read_through == 99
    _assert_follows_the_trial(series, tmp_path)


def test_a_chunk_that_cannot_be_written_leaves_the_step_files_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / locations.SCALARS_DIR).write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="trainprobe"):
        writer = _write(tmp_path, "worker_0", range(150), seed=1)
        writer.close()
    assert writer.error is None and writer.steps_written == 150
    assert "no longer kept as chunks" in caplog.text
    assert read_written_scalars(str(tmp_path)) is None
    assert len(trial_scalars(tmp_path)[("loss", "TRAIN")][0]) == 120


def test_a_damaged_chunk_is_read_from_the_step_files(tmp_path: Path) -> None:
    _write(tmp_path, "worker_0", range(250), seed=1).close()
    damaged = tmp_path / locations.scalar_chunks_dir("worker_0") / _chunks(tmp_path, "worker_0")[1]
    damaged.write_bytes(damaged.read_bytes()[:200])

    series = ScalarSeries(output=str(tmp_path))
    assert series.read_through == 99
    _assert_follows_the_trial(series, tmp_path)


def _assert_follows_the_trial(series: ScalarSeries, out: Path) -> None:
    """``series``, having read the steps after its chunks from the files, holds the trial's."""
    series.follow(create_trial(str(out), timeout=0), ["loss", "count", "scalar/ratio"])
    for (name, mode), (steps, values) in trial_scalars(out).items():
        found = series.of(name)[mode]
        assert (found[0].tolist(), found[1].tolist()) == (steps, values)


def test_a_live_writer_keeps_the_chunk_so_far_as_one_piece_that_the_chunk_replaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(written_scalars, "PIECE_STEPS", 20)
    writer = _write(tmp_path, "worker_0", range(250), seed=1)
    writer.flush()  # the training goes on: the chunk of steps 200-299 is not whole
    assert _chunks(tmp_path, "worker_0") == [
        "000000000000-000000000099.chunk",
        "000000000100-000000000199.chunk",
        "000000000200-000000000239.chunk",  # the chunk so far: one piece, in place of 200-219
    ]
    through_239 = {
        key: (steps[:kept], values[:kept])
        for key, (steps, values) in trial_scalars(tmp_path).items()
        for kept in [sum(step <= 239 for step in steps)]
    }
    assert _read_series(tmp_path) == through_239

    writer.close()
    assert _chunks(tmp_path, "worker_0")[2:] == ["000000000200-000000000249.chunk"]
    assert _read_series(tmp_path) == trial_scalars(tmp_path)


def test_a_slow_training_keeps_its_chunk_so_far_every_few_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(written_scalars, "PIECE_SECONDS", 0.0)
    writer = _write(tmp_path, "worker_0", range(3), seed=1)
    writer.flush()
    assert _chunks(tmp_path, "worker_0") == ["000000000000-000000000002.chunk"]
    assert _read_series(tmp_path) == trial_scalars(tmp_path)
    writer.close()
    assert _chunks(tmp_path, "worker_0") == ["000000000000-000000000002.chunk"]


def test_in_object_storage_the_pieces_and_chunks_are_objects(
    s3_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(written_scalars, "PIECE_STEPS", 30)
    out = f"{s3_url}/scalar-chunks"
    writer = _write_to(out, range(160))
    writer.flush()
    chunks = locations.join(out, locations.scalar_chunks_dir("worker_0"))
    assert [name for name in files.list_files(chunks)] == [
        "000000000000-000000000099.chunk",
        "000000000100-000000000159.chunk",  # the second piece, in place of 100-129
    ]
    writer.close()  # the chunk of steps 100-159 replaces the piece of the same steps
    assert files.list_files(chunks)[1:] == ["000000000100-000000000159.chunk"]
    assert _read_series(out) == trial_scalars(out)
    assert ScalarSeries(output=out).read_through == 159
