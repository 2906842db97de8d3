"""The trial API over output written by trainprobe's StepWriter: modes, steps, values, reductions,
workers, collections, a job in progress, and every error a user can meet."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np
import pytest

from trainprobe.config.errors import ConfigError
from trainprobe.exceptions import (
    InvalidWorker,
    MissingCollectionFiles,
    NoMoreData,
    ShapeUnavailableForStep,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
    TrainprobeAnalysisError,
)
from trainprobe.storage.object_store import ObjectStoreUnavailable
from trainprobe.storage.reduction_names import reduction_tensor_name
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end
from trainprobe.trials import StepState, create_trial, modes

COLLECTIONS = {
    "weights": {"name": "weights", "include_regex": ["^(?!gradient).*weight"], "tensor_names": []},
    "losses": {"name": "losses", "include_regex": ["[Ll]oss_(?!input).*output"]},
    "custom": {"name": "custom", "include_regex": [], "tensor_names": ["fc.bias"]},
}


def _weight(step: int, worker: str = "worker_0") -> np.ndarray:
    return np.arange(6, dtype=np.float32).reshape(2, 3) * (step + 1) - int(worker[-1])


def _write_step(
    out: Path,
    step: int,
    mode: modes,
    mode_step: int,
    worker: str = "worker_0",
    *,
    extra: dict[str, np.ndarray] | None = None,
) -> None:
    with StepWriter(str(out), step, worker) as writer:
        arrays = {"fc.weight": _weight(step, worker), "fc.bias": np.full(2, float(step))}
        arrays["CrossEntropyLoss_output_0"] = np.array(1.0 / (step + 1), dtype=np.float32)
        for name, array in (arrays | (extra or {})).items():
            writer.add(name, array, mode=mode, mode_step=mode_step)


def _training_run(out: Path) -> list[tuple[int, modes, int]]:
    """TRAIN steps saved every 5 mode steps, with EVAL passes between: a finished job."""
    schedule: list[tuple[int, modes, int]] = []
    step = 0
    for epoch in range(2):
        for train_step in range(epoch * 10, epoch * 10 + 10):
            if train_step % 5 == 0:
                schedule.append((step, modes.TRAIN, train_step))
            step += 1
        for eval_step in range(epoch * 3, epoch * 3 + 3):
            schedule.append((step, modes.EVAL, eval_step))
            step += 1
    for global_step, mode, mode_step in schedule:
        _write_step(out, global_step, mode, mode_step)
    write_collections_file(str(out), "worker_0", COLLECTIONS, num_workers=1)
    write_training_end(str(out))
    return schedule


def test_steps_and_modes(tmp_path: Path) -> None:
    schedule = _training_run(tmp_path)
    trial = create_trial(str(tmp_path))
    assert trial.loaded_all_steps
    assert trial.steps() == [step for step, _, _ in schedule]
    assert trial.steps(mode=modes.TRAIN) == [0, 5, 10, 15]
    assert trial.steps(mode=modes.EVAL) == [0, 1, 2, 3, 4, 5]
    assert trial.steps(mode=modes.PREDICT) == []
    assert trial.modes() == [modes.TRAIN, modes.EVAL]
    for step, mode, mode_step in schedule:
        assert trial.mode_modestep(step) == (mode, mode_step)
        assert trial.mode(step) == mode
        assert trial.mode_step(step) == mode_step
        assert trial.global_step(mode, mode_step) == step
    assert trial.mode_modestep(1) == (None, None)
    assert trial.global_step(modes.TRAIN, 1) is None
    assert trial.workers() == ["worker_0"]


def test_values_by_global_and_mode_step(tmp_path: Path) -> None:
    schedule = _training_run(tmp_path)
    trial = create_trial(str(tmp_path))
    weight = trial.tensor("fc.weight")
    assert weight.steps() == trial.steps()
    assert weight.steps(mode=modes.EVAL) == [0, 1, 2, 3, 4, 5]
    for step, mode, mode_step in schedule:
        np.testing.assert_array_equal(weight.value(step), _weight(step))
        np.testing.assert_array_equal(weight.value(mode_step, mode=mode), _weight(step))
        assert weight.shape(step) == (2, 3)
    values = weight.values(mode=modes.TRAIN)
    assert sorted(values) == [0, 5, 10, 15]
    np.testing.assert_array_equal(values[10], _weight(trial.global_step(modes.TRAIN, 10) or -1))
    assert weight.prev_steps(13, 2) == [12, 13]
    assert weight.prev_steps(5, mode=modes.TRAIN) == [0, 5]


def test_values_at_reads_many_tensors_of_one_step_as_value_does(tmp_path: Path) -> None:
    schedule = _training_run(tmp_path)
    trial = create_trial(str(tmp_path))
    names = ["CrossEntropyLoss_output_0", "fc.weight", "fc.bias", "no.such.tensor"]
    for step, _, _ in schedule:
        found = trial.values_at(step, names)
        assert sorted(found) == sorted(names[:3])
        for name, value in found.items():
            np.testing.assert_array_equal(value, trial.tensor(name).value(step))
    assert trial.values_at(1, names) == {}  # a step that was not saved


def test_values_are_independent_writable_arrays(tmp_path: Path) -> None:
    _training_run(tmp_path)
    trial = create_trial(str(tmp_path))
    value = trial.tensor("fc.weight").value(0)
    assert value.flags.writeable
    value[...] = -7
    np.testing.assert_array_equal(trial.tensor("fc.weight").value(0), _weight(0))


def test_tensor_names_by_step_mode_regex_and_collection(tmp_path: Path) -> None:
    _training_run(tmp_path)
    _write_step(tmp_path, 100, modes.PREDICT, 0, extra={"predictions": np.ones(3)})
    trial = create_trial(str(tmp_path))
    everything = ["CrossEntropyLoss_output_0", "fc.bias", "fc.weight", "predictions"]
    assert trial.tensor_names() == everything
    assert trial.tensor_names(step=100) == everything
    assert trial.tensor_names(step=0, mode=modes.PREDICT) == everything
    assert trial.tensor_names(step=0) == everything[:3]
    assert trial.tensor_names(mode=modes.TRAIN) == everything[:3]
    assert trial.tensor_names(step=3) == []
    assert trial.tensor_names(regex="^fc") == ["fc.bias", "fc.weight"]
    assert trial.tensor_names(regex=["bias", "pred"]) == ["fc.bias", "predictions"]
    assert trial.tensor_names(collection="weights") == ["fc.weight"]
    assert trial.tensor_names(collection="losses") == ["CrossEntropyLoss_output_0"]
    assert trial.tensor_names(collection=trial.collection("custom")) == ["fc.bias"]
    with pytest.raises(ConfigError, match="only one"):
        trial.tensor_names(regex="fc", collection="weights")


def test_collections(tmp_path: Path) -> None:
    _training_run(tmp_path)
    trial = create_trial(str(tmp_path))
    assert sorted(trial.collections()) == ["custom", "losses", "weights"]
    weights = trial.collection("weights")
    assert weights.include_regex == ("^(?!gradient).*weight",)
    assert trial.collection("custom").tensor_names == frozenset({"fc.bias"})


def test_collections_can_be_made_and_extended_as_in_smdebug(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _training_run(tmp_path)
    trial = create_trial(str(tmp_path))
    with caplog.at_level(logging.INFO, logger="trainprobe"):
        made = trial.collection("weight")
    assert "did you mean 'weights'" in caplog.text
    assert trial.tensor_names(collection="weight") == []
    with pytest.raises(ConfigError, match="Did you mean 'losses'"):
        trial.tensor_names(collection="loses")  # neither saved nor made
    made.add_tensor_name("fc.bias")
    assert trial.tensor_names(collection="weight") == ["fc.bias"]
    trial.collection("losses").include("^fc")
    assert trial.tensor_names(collection="losses") == [
        "CrossEntropyLoss_output_0",
        "fc.bias",
        "fc.weight",
    ]
    assert create_trial(f"  {tmp_path}\n").tensor_names() == trial.tensor_names()


def test_saved_and_computed_reductions(tmp_path: Path) -> None:
    weight = np.array([[1.0, -4.0], [2.5, 0.5]], dtype=np.float32)
    extra = {
        reduction_tensor_name("mean", "w", abs=False): np.array(99.0),  # saved, not recomputed
        reduction_tensor_name("l2", "w", abs=True): np.array(42.0),
        "w": weight,
        reduction_tensor_name("max", "g", abs=False): np.array(3.0),  # no raw tensor for g
    }
    _write_step(tmp_path, 0, modes.TRAIN, 0, extra=extra)
    write_collections_file(str(tmp_path), "worker_0", COLLECTIONS, num_workers=1)
    write_training_end(str(tmp_path))
    trial = create_trial(str(tmp_path))
    assert "g" in trial.tensor_names() and "w" in trial.tensor_names()
    assert not any(name.startswith("smdebug/") for name in trial.tensor_names())
    w = trial.tensor("w")
    assert float(w.reduction_value(0, "mean")) == 99.0
    assert float(w.reduction_value(0, "l2", abs=True)) == 42.0
    assert float(w.reduction_value(0, "l2_norm", abs=True)) == 42.0
    assert w.reduction_values(0) == {("l2", True): 42.0, ("mean", False): 99.0}
    oracle = {
        "min": weight.min(),
        "max": weight.max(),
        "sum": weight.sum(),
        "prod": weight.prod(),
        "std": weight.std(),
        "variance": weight.var(),
        "l1": np.abs(weight).sum(),
        "l2": np.sqrt((weight.astype(np.float64) ** 2).sum()),
    }
    for name, expected in oracle.items():
        assert float(w.reduction_value(0, name)) == pytest.approx(float(expected), rel=1e-6)
    assert float(w.reduction_value(0, "mean", abs=True)) == pytest.approx(np.abs(weight).mean())
    g = trial.tensor("g")
    assert float(g.reduction_value(0, "max")) == 3.0
    with pytest.raises(TensorUnavailableForStep) as caught:
        g.value(0)
    assert caught.value.has_reductions
    with pytest.raises(TensorUnavailableForStep):
        g.reduction_value(0, "min")
    with pytest.raises(ShapeUnavailableForStep):
        g.shape(0)
    with pytest.raises(ConfigError, match="Did you mean 'mean'"):
        w.reduction_value(0, "meen")


def test_shapes_saved_without_values(tmp_path: Path) -> None:
    with StepWriter(str(tmp_path), 0, "worker_0") as writer:
        writer.add_shape("big", "model.big", (1000, 3), mode=modes.TRAIN, mode_step=0)
    write_collections_file(str(tmp_path), "worker_0", COLLECTIONS, num_workers=1)
    write_training_end(str(tmp_path))
    trial = create_trial(str(tmp_path))
    big = trial.tensor("big")
    assert big.shape(0) == (1000, 3)
    assert big.original_name == "model.big"
    assert trial.steps(mode=modes.TRAIN) == [0]
    with pytest.raises(TensorUnavailableForStep) as caught:
        big.value(0)
    assert not caught.value.has_reductions


def test_the_original_dtype_is_reported(tmp_path: Path) -> None:
    with StepWriter(str(tmp_path), 0, "worker_0") as writer:
        array = np.array([1.5, 2.0], dtype=np.float32)
        writer.add("bf", array, mode=modes.TRAIN, mode_step=0, original_dtype="bfloat16")
        writer.add("f", array, mode=modes.TRAIN, mode_step=0)
    write_collections_file(str(tmp_path), "worker_0", COLLECTIONS, num_workers=1)
    trial = create_trial(str(tmp_path))
    assert trial.tensor("bf").original_dtype(0) == "bfloat16"
    assert trial.tensor("bf").value(0).dtype == np.float32
    assert trial.tensor("f").original_dtype(0) == "float32"


def test_errors_for_missing_tensors_and_steps(tmp_path: Path) -> None:
    _training_run(tmp_path)
    trial = create_trial(str(tmp_path))
    assert not trial.has_tensor("nope")
    with pytest.raises(TensorUnavailable, match="nope"):
        trial.tensor("nope")
    weight = trial.tensor("fc.weight")
    with pytest.raises(StepUnavailable):
        weight.value(1)  # skipped by the save interval
    with pytest.raises(StepUnavailable):
        weight.value(3, mode=modes.TRAIN)
    with pytest.raises(StepUnavailable):
        trial.wait_for_steps([1])
    with pytest.raises(NoMoreData) as caught:
        trial.wait_for_steps([1000])
    assert caught.value.last_step == trial.steps()[-1]
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([6], mode=modes.EVAL)
    trial.wait_for_steps([0, 5, 10], mode=modes.TRAIN)
    assert trial.has_passed_step(5, modes.TRAIN) == StepState.AVAILABLE
    assert trial.has_passed_step(6, modes.TRAIN) == StepState.UNAVAILABLE
    assert trial.has_passed_step(99, modes.TRAIN) == StepState.UNAVAILABLE
    with pytest.raises(InvalidWorker, match="worker_9"):
        weight.value(0, worker="worker_9")
    assert issubclass(InvalidWorker, TrainprobeAnalysisError)


def test_following_a_job_in_progress(tmp_path: Path) -> None:
    write_collections_file(str(tmp_path), "worker_0", COLLECTIONS, num_workers=1)
    trial = create_trial(str(tmp_path))
    assert trial.steps() == []
    assert not trial.loaded_all_steps
    assert trial.has_passed_step(0) == StepState.NOT_YET_AVAILABLE
    assert not trial.has_tensor("fc.weight")
    _write_step(tmp_path, 0, modes.TRAIN, 0)
    assert trial.steps() == [0]
    np.testing.assert_array_equal(trial.tensor("fc.weight").value(0), _weight(0))
    with pytest.raises(StepNotYetAvailable):
        trial.tensor("fc.weight").value(5)
    with pytest.raises(StepNotYetAvailable):
        trial.wait_for_steps([5], timeout=0.3)
    writer = threading.Thread(target=_write_step, args=(tmp_path, 5, modes.TRAIN, 5))
    writer.start()
    trial.wait_for_steps([5], timeout=60)
    writer.join()
    np.testing.assert_array_equal(trial.tensor("fc.weight").value(5), _weight(5))
    assert trial.has_passed_step(3) == StepState.UNAVAILABLE  # step 5 is complete
    write_training_end(str(tmp_path))
    assert trial.has_passed_step(10) == StepState.UNAVAILABLE
    assert trial.loaded_all_steps
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([10])


def test_several_workers_and_step_completeness(tmp_path: Path) -> None:
    for worker in ("worker_0", "worker_1"):
        write_collections_file(str(tmp_path), worker, COLLECTIONS, num_workers=2)
    trial = create_trial(str(tmp_path))
    _write_step(tmp_path, 0, modes.TRAIN, 0, "worker_0")
    _write_step(tmp_path, 0, modes.TRAIN, 0, "worker_1")
    _write_step(tmp_path, 2, modes.TRAIN, 2, "worker_1")
    assert trial.num_workers == 2
    assert trial.steps() == [0]
    assert trial.steps(show_incomplete_steps=True) == [0, 2]
    assert trial.has_passed_step(2) == StepState.NOT_YET_AVAILABLE
    assert trial.tensor("fc.weight").steps() == [0]
    assert trial.tensor("fc.weight").steps(show_incomplete_steps=True) == [0, 2]
    # worker_0 skipped step 2 and went on: once step 4 is complete, step 2 is as complete as
    # it will ever be.
    _write_step(tmp_path, 4, modes.TRAIN, 4, "worker_0")
    _write_step(tmp_path, 4, modes.TRAIN, 4, "worker_1")
    assert trial.steps() == [0, 2, 4]
    assert trial.has_passed_step(2) == StepState.AVAILABLE
    weight = trial.tensor("fc.weight")
    assert weight.workers(0) == ["worker_0", "worker_1"]
    assert weight.workers(2) == ["worker_1"]
    np.testing.assert_array_equal(weight.value(0), _weight(0, "worker_0"))
    np.testing.assert_array_equal(weight.value(0, worker="worker_1"), _weight(0, "worker_1"))
    np.testing.assert_array_equal(weight.value(2), _weight(2, "worker_1"))
    with pytest.raises(InvalidWorker):
        weight.value(2, worker="worker_0")
    assert trial.workers() == ["worker_0", "worker_1"]


def test_an_empty_or_missing_location_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(MissingCollectionFiles, match="does not exist"):
        create_trial(str(tmp_path / "absent"), timeout=0.2)
    with pytest.raises(MissingCollectionFiles, match="no collections file"):
        create_trial(str(tmp_path), timeout=0.2)
    write_training_end(str(tmp_path))
    with pytest.raises(MissingCollectionFiles, match="ended"):
        create_trial(str(tmp_path), timeout=60)


def test_range_steps_and_bad_arguments(tmp_path: Path) -> None:
    _training_run(tmp_path)
    trial = create_trial(str(tmp_path), name="run-1", range_steps=(5, 13))
    assert trial.name == "run-1"
    assert trial.steps() == [5, 10, 11, 12]
    with pytest.raises(ObjectStoreUnavailable, match="nosuch://"):
        create_trial("nosuch://bucket/prefix")
    with pytest.raises(ConfigError, match="timeout"):
        create_trial(str(tmp_path), timeout=-1)
