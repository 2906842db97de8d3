"""ExplodingTensor, AllZero, TensorVariance and UnchangedTensor on hand-made trials.

Each threshold is tested on both sides of its boundary; the semantics are the spec's parameter
tables and reference/smdebug.md §4.3.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from builtin_trials import EVAL, TRAIN, TrialBuilder, evidence_of, fired_steps

from trainprobe.config.errors import ConfigError
from trainprobe.rules.builtin import AllZero, ExplodingTensor, TensorVariance, UnchangedTensor
from trainprobe.storage.reduction_names import reduction_tensor_name


def test_exploding_tensor_fires_on_nan_and_infinity_but_not_on_the_largest_finite_value(
    tmp_path: Path,
) -> None:
    largest = np.finfo(np.float32).max
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "w", np.array([1.0, largest], dtype=np.float32))
        .add(1, "w", np.array([1.0, np.inf], dtype=np.float32))
        .add(2, "w", np.array([np.nan, 1.0], dtype=np.float32))
        .add(3, "w", np.array([1.0, -largest], dtype=np.float32))
        .write()
    )
    rule = ExplodingTensor(trial)
    assert fired_steps(rule) == [1, 2]
    evidence = evidence_of(rule)
    assert [item.step for item in evidence] == [1, 2]
    assert evidence[0].tensor == "w"
    assert "1 non-finite" in evidence[0].message


def test_exploding_tensor_only_nan_ignores_infinity(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).add(0, "w", [1.0, -np.inf]).add(1, "w", [np.nan, 1.0]).write()
    assert fired_steps(ExplodingTensor(trial, only_nan=True)) == [1]
    assert fired_steps(ExplodingTensor(trial, only_nan="False")) == [0, 1]


def test_exploding_tensor_reads_reductions_when_only_they_were_saved(tmp_path: Path) -> None:
    builder = TrialBuilder(tmp_path)
    builder.add(0, reduction_tensor_name("max", "w", False), np.float32(3.0))
    builder.add(1, reduction_tensor_name("max", "w", False), np.float32(np.nan))
    trial = builder.write()
    assert trial.tensor_names() == ["w"]
    assert fired_steps(ExplodingTensor(trial)) == [1]


def test_exploding_tensor_looks_only_at_the_selected_tensors(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "Net_fc.weight", [np.nan])
        .add(0, "gradient/Net_fc.weight", [0.5])
        .add(1, "Net_fc.weight", [1.0])
        .add(1, "gradient/Net_fc.weight", [np.inf])
        .collection("gradients", regex=["^gradient"])
        .write()
    )
    assert fired_steps(ExplodingTensor(trial, collection_names="gradients")) == [1]
    assert fired_steps(ExplodingTensor(trial, tensor_regex=["^Net_"])) == [0]
    assert fired_steps(ExplodingTensor(trial, "gradients", "^Net_")) == [0, 1]


def test_all_zero_fires_at_the_threshold_percentage_not_below(tmp_path: Path) -> None:
    half = np.ones(100)
    half[:50] = 0
    just_under = np.ones(100)
    just_under[:49] = 0
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "t", np.zeros(100))
        .add(1, "t", half)
        .add(2, "t", just_under)
        .write()
    )
    assert fired_steps(AllZero(trial, tensor_regex="t")) == [0]
    rule = AllZero(trial, tensor_regex="t", threshold=50)
    assert fired_steps(rule) == [0, 1]
    assert [item.value for item in evidence_of(rule)] == [100.0, 50.0]


def test_all_zero_needs_a_collection_or_a_pattern(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).add(0, "t", [0.0]).write()
    with pytest.raises(ConfigError, match="collection_names, tensor_regex"):
        AllZero(trial)


def test_all_zero_from_an_absolute_maximum_of_zero(tmp_path: Path) -> None:
    builder = TrialBuilder(tmp_path)
    builder.add(0, reduction_tensor_name("max", "t", True), np.float32(0.0))
    builder.add(1, reduction_tensor_name("max", "t", True), np.float32(1e-30))
    trial = builder.write()
    assert fired_steps(AllZero(trial, tensor_regex="t")) == [0]


def _with_variance(variance: float) -> np.ndarray:
    spread = math.sqrt(variance)
    return np.array([-spread, spread], dtype=np.float64)


def test_tensor_variance_bounds_are_strict(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .series("t", {0: _with_variance(10.5), 1: _with_variance(9.5)})
        .series("t", {2: _with_variance(0.9e-5), 3: _with_variance(1.1e-5)})
        .write()
    )
    rule = TensorVariance(trial, tensor_regex="t", max_threshold=10, min_threshold=1e-5)
    assert fired_steps(rule) == [0, 2]
    evidence = evidence_of(rule)
    assert evidence[0].value == pytest.approx(10.5)
    assert evidence[0].threshold == 10.0
    assert evidence[1].threshold == 1e-5


def test_tensor_variance_from_a_saved_std(tmp_path: Path) -> None:
    builder = TrialBuilder(tmp_path)
    builder.add(0, reduction_tensor_name("std", "t", False), np.float64(4.0))
    builder.add(1, reduction_tensor_name("std", "t", False), np.float64(3.0))
    trial = builder.write()
    assert fired_steps(TensorVariance(trial, tensor_regex="t", max_threshold="10")) == [0]


def test_tensor_variance_needs_a_bound(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).add(0, "t", [1.0]).write()
    with pytest.raises(ConfigError, match="max_threshold, min_threshold"):
        TensorVariance(trial, tensor_regex="t")


def test_unchanged_tensor_needs_num_steps_equal_values(tmp_path: Path) -> None:
    values = {0: [1.0, 2.0], 10: [1.0, 2.0], 20: [1.0, 2.0], 30: [1.5, 2.0], 40: [1.5, 2.0]}
    trial = TrialBuilder(tmp_path).series("losses_0", values).write()
    rule = UnchangedTensor(trial, tensor_regex="losses")
    assert fired_steps(rule) == [20]
    assert evidence_of(rule)[0].value == [0, 10, 20]
    assert fired_steps(UnchangedTensor(trial, tensor_regex="losses", num_steps=2)) == [10, 20, 40]


def test_unchanged_tensor_tolerances_are_numpy_allclose(tmp_path: Path) -> None:
    # allclose(a, b): |a - b| <= atol + rtol * |b|, here 1e-8 + 1e-5.
    close = 1.0 + 0.9e-5
    apart = 1.0 + 2e-5
    trial = (
        TrialBuilder(tmp_path)
        .series("t", {0: [1.0], 1: [close], 2: [1.0], 3: [apart], 4: [1.0]})
        .write()
    )
    assert fired_steps(UnchangedTensor(trial, tensor_regex="t")) == [2]
    assert fired_steps(UnchangedTensor(trial, tensor_regex="t", rtol=1e-4)) == [2, 3, 4]


def test_unchanged_tensor_nan_equal_only_when_asked(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).series("t", {0: [np.nan], 1: [np.nan]}).write()
    assert fired_steps(UnchangedTensor(trial, tensor_regex="t", num_steps=2)) == []
    assert fired_steps(UnchangedTensor(trial, "", "t", 2, equal_nan=True)) == [1]


def test_unchanged_tensor_compares_steps_of_the_same_mode(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "w", [1.0], TRAIN)
        .add(1, "w", [1.0], EVAL)
        .add(2, "w", [2.0], TRAIN)
        .add(3, "w", [1.0], EVAL)
        .write()
    )
    assert fired_steps(UnchangedTensor(trial, tensor_regex="w", num_steps=2)) == [3]
