"""The hook's TensorBoard export: what TensorBoard shows, and failures that stay out of training."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator

from trainprobe.capture.collections import Collection
from trainprobe.capture.tensorboard_export import Summary, TensorBoardExport, summary_for
from trainprobe.storage.modes import ModeKeys

KEEP_ALL = {event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0}
LOSS = "CrossEntropyLoss_output_0"
WEIGHT = "Net_fc1.weight"
L2 = "smdebug/reductions/l2/Net_fc1.weight"


def _run(directory: Path) -> event_accumulator.EventAccumulator:
    accumulator = event_accumulator.EventAccumulator(str(directory), size_guidance=KEEP_ALL)
    accumulator.Reload()
    return accumulator


def _scalars(run: event_accumulator.EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(event.step, event.value) for event in run.Scalars(tag)]


def test_a_run_shows_losses_reductions_and_histograms_per_mode(tmp_path: Path) -> None:
    export = TensorBoardExport(str(tmp_path / "tensorboard"))
    rng = np.random.default_rng(0)
    weights = {step: rng.normal(0.0, 0.1, (8, 4)).astype(np.float32) for step in (0, 2)}
    # Global steps 0 and 2 are TRAIN, 1 and 3 EVAL, as the hook's writer thread sees them.
    for step in range(4):
        mode = ModeKeys.TRAIN if step % 2 == 0 else ModeKeys.EVAL
        export.add(mode, step, "losses", LOSS, np.array(1.0 / (step + 1), np.float32), True)
        if mode == ModeKeys.TRAIN:
            weight = weights[step]
            export.add(mode, step, "weights", WEIGHT, weight, False)
            l2 = np.array(np.linalg.norm(weight), np.float32)
            export.add(mode, step, "weights", L2, l2, True)
        export.flush()
    export.close()

    train = _run(tmp_path / "tensorboard" / "TRAIN")
    assert sorted(train.Tags()["scalars"]) == [LOSS, L2]
    assert train.Tags()["histograms"] == [f"weights/{WEIGHT}"]
    assert _scalars(train, LOSS) == [(0, 1.0), (2, float(np.float32(1 / 3)))]
    assert [step for step, _ in _scalars(train, L2)] == [0, 2]
    for event in train.Histograms(f"weights/{WEIGHT}"):
        weight = weights[event.step].astype(np.float64)
        histogram = event.histogram_value
        assert (histogram.min, histogram.max) == (weight.min(), weight.max())
        assert histogram.num == weight.size == sum(histogram.bucket)
        assert histogram.sum == pytest.approx(weight.sum())
    evaluation = _run(tmp_path / "tensorboard" / "EVAL")
    assert evaluation.Tags()["scalars"] == [LOSS] and evaluation.Tags()["histograms"] == []
    assert _scalars(evaluation, LOSS) == [(1, 0.5), (3, 0.25)]
    assert export.bytes_written == sum(
        path.stat().st_size for path in (tmp_path / "tensorboard").rglob("*") if path.is_file()
    )


def test_summary_for_picks_the_collection_as_smdebug_did() -> None:
    losses, weights = Collection("losses"), Collection("weights")
    gradients = Collection("gradients")
    quiet = Collection("relu_output", save_histogram=False)
    assert summary_for([weights, losses]) == Summary("losses", scalar=True)
    assert summary_for([quiet, weights, gradients]) == Summary("weights", scalar=False)
    assert summary_for([quiet]) is None
    assert summary_for([]) is None


def test_values_that_make_no_summary_are_skipped(tmp_path: Path) -> None:
    export = TensorBoardExport(str(tmp_path))
    mode = ModeKeys.GLOBAL
    export.add(mode, 0, "losses", "not_a_scalar", np.ones(3), True)
    export.add(mode, 0, "default", "mask", np.array([True, False]), False)
    export.add(mode, 0, "default", "empty", np.zeros((0, 4), np.float32), False)
    export.add(mode, 0, "default", "complex", np.ones(2, np.complex64), False)
    export.add(mode, 0, "default", "all_nan", np.full(4, np.nan), False)
    export.add(mode, 0, "default", "kept", np.arange(4.0), False)
    export.close()
    run = _run(tmp_path / "GLOBAL")
    assert run.Tags()["scalars"] == []
    assert run.Tags()["histograms"] == ["default/kept"]
    assert export.enabled is False and export.error is None


def test_an_unwritable_directory_is_logged_once_and_turns_the_export_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    export = TensorBoardExport(str(blocker / "tensorboard"))
    with caplog.at_level(logging.ERROR, logger="trainprobe"):
        for step in range(3):
            export.add(ModeKeys.TRAIN, step, "losses", LOSS, np.array(0.5), True)
            export.flush()
        export.close()
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "TensorBoard export" in errors[0].getMessage()
    assert str(blocker / "tensorboard") in errors[0].getMessage()
    assert export.enabled is False
    assert isinstance(export.error, OSError)


class _Unreadable:
    """A value whose conversion to an array fails, as a broken device copy would."""

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        raise RuntimeError("the copy from the device failed")


def test_a_failure_midway_keeps_what_was_written_and_drops_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    export = TensorBoardExport(str(tmp_path))
    export.add(ModeKeys.TRAIN, 0, "losses", LOSS, np.array(2.0), True)
    export.flush()
    with caplog.at_level(logging.ERROR, logger="trainprobe"):
        export.add(ModeKeys.TRAIN, 1, "weights", WEIGHT, _Unreadable(), False)  # type: ignore[arg-type]
        export.add(ModeKeys.TRAIN, 2, "losses", LOSS, np.array(1.0), True)
        export.close()
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    assert isinstance(export.error, RuntimeError)
    run = _run(tmp_path / "TRAIN")
    assert _scalars(run, LOSS) == [(0, 2.0)]
    assert run.Tags()["histograms"] == []
