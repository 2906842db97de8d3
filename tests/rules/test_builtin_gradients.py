"""VanishingGradient, WeightUpdateRatio and PoorWeightInitialization on hand-made trials."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from builtin_trials import EVAL, TRAIN, TrialBuilder, evidence_of, fired_steps, scalars

from trainprobe.rules import InsufficientInformationForRuleInvocation
from trainprobe.rules.builtin import (
    PoorWeightInitialization,
    VanishingGradient,
    WeightUpdateRatio,
)
from trainprobe.storage.reduction_names import reduction_tensor_name

GRAD = "gradient/Net_fc1.weight"


def test_vanishing_gradient_fires_strictly_below_the_threshold(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .series(GRAD, {0: [-0.9e-7, 0.9e-7], 1: [1e-7, -1e-7], 2: [1.1e-7, 0.0, -2.2e-7]})
        .collection("gradients", regex=["^gradient"])
        .write()
    )
    rule = VanishingGradient(trial)
    assert fired_steps(rule) == [0]
    (evidence,) = evidence_of(rule)
    assert evidence.tensor == GRAD
    assert evidence.value == pytest.approx(0.9e-7)
    assert evidence.threshold == 1e-7
    assert evidence.message.startswith(
        f"{GRAD}: mean |g| = 9e-08 < threshold 1e-07 at TRAIN step 0"
    )
    assert fired_steps(VanishingGradient(trial, threshold="1.2e-7")) == [0, 1, 2]


def test_vanishing_gradient_prefers_the_saved_abs_mean(tmp_path: Path) -> None:
    builder = TrialBuilder(tmp_path)
    # Only the abs_mean reduction was saved, no raw gradient.
    builder.add(0, reduction_tensor_name("mean", GRAD, True), np.float64(5e-8))
    builder.add(1, reduction_tensor_name("mean", GRAD, True), np.float64(5e-6))
    trial = builder.write()
    assert fired_steps(VanishingGradient(trial)) == [0]


def test_vanishing_gradient_cannot_judge_a_step_without_gradients(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, GRAD, [1.0], TRAIN)
        .add(1, "CrossEntropyLoss_output_0", 0.5, EVAL)
        .write()
    )
    rule = VanishingGradient(trial)
    assert rule.evaluate(0) is False
    with pytest.raises(InsufficientInformationForRuleInvocation, match="gradients"):
        rule.evaluate(1)


def test_vanishing_gradient_sets_aside_a_gradient_that_has_never_been_non_zero(
    tmp_path: Path,
) -> None:
    """A branch behind a zero-initialised layer: 0 until the first update, then judged."""
    branch, head = "gradient/Net_block.conv.weight", "gradient/Net_head.weight"
    trial = (
        TrialBuilder(tmp_path)
        .series(branch, {0: [0.0, 0.0], 1: [1e-3, -1e-3], 2: [0.0, 0.0]})
        .series(head, {0: [0.1], 1: [0.1], 2: [0.1]})
        .write()
    )
    rule = VanishingGradient(trial)
    # Step 2: the branch's gradient has been non-zero, and is 0 again: that fires.
    assert fired_steps(rule) == [2]
    assert evidence_of(rule)[0].tensor == branch
    (remark,) = rule.remarks()
    assert remark.startswith("Set aside while their gradient was exactly 0 and had never been")
    assert remark.endswith(f", at TRAIN step 0: {branch}.")


def test_vanishing_gradient_fires_when_every_gradient_is_zero(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .series("gradient/Net_fc1.weight", {0: [0.0, 0.0]})
        .series("gradient/Net_fc2.weight", {0: [0.0]})
        .write()
    )
    rule = VanishingGradient(trial)
    assert fired_steps(rule) == [0]
    assert len(evidence_of(rule)) == 2
    assert rule.remarks() == []


def test_vanishing_gradient_sets_aside_a_bias_the_loss_is_invariant_to(tmp_path: Path) -> None:
    key = "gradient/Net_attention.key."
    trial = (
        TrialBuilder(tmp_path)
        # Step 0: the bias is rounding noise beside its weight's gradient (1e5 times smaller).
        .add(0, key + "bias", [1e-12, -1e-12])
        .add(0, key + "weight", [1e-7, -1e-7])
        # Step 1: 500 times smaller only, as a vanishing layer's bias and weight can be.
        .add(1, key + "bias", [2e-8, -2e-8])
        .add(1, key + "weight", [1e-5, -1e-5])
        # Step 2: the weight is below threshold too: both vanish.
        .add(2, key + "bias", [1e-12, -1e-12])
        .add(2, key + "weight", [5e-8, -5e-8])
        .write()
    )
    rule = VanishingGradient(trial)
    assert fired_steps(rule) == [1, 2]
    assert [item.tensor for item in evidence_of(rule)] == [
        key + "bias",
        key + "bias",
        key + "weight",
    ]
    (remark,) = rule.remarks()
    assert remark.startswith(
        "Set aside biases whose gradient was below threshold while their layer's weight gradient "
        "was above it and over 1000 times larger"
    )
    assert remark.endswith(f", at TRAIN step 0: {key}bias.")


def test_vanishing_gradient_sets_aside_a_gradient_that_is_not_finite(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .series(GRAD, {0: [0.1], 1: [float("nan")]})
        .series("gradient/Net_fc2.weight", {0: [0.1], 1: [float("inf")]})
        .write()
    )
    rule = VanishingGradient(trial)
    assert rule.evaluate(0) is False
    with pytest.raises(InsufficientInformationForRuleInvocation, match="NaN or infinite"):
        rule.evaluate(1)
    assert rule.remarks() == [
        "Set aside gradients that were not finite (ExplodingTensor is the rule for those), at "
        f"TRAIN step 1: {GRAD}, gradient/Net_fc2.weight."
    ]


def _update(weights: np.ndarray, ratio: float) -> np.ndarray:
    """``weights`` moved by ``ratio`` times their norm, in the direction of the weights."""
    return weights * (1.0 + ratio)


def test_weight_update_ratio_large_and_small_boundaries(tmp_path: Path) -> None:
    w0 = np.array([3.0, 4.0])
    steps = {0: w0}
    steps[1] = _update(steps[0], 10.5)  # ratio 10.5 > 10
    steps[2] = _update(steps[1], 9.5)  # 9.5: fine
    steps[3] = _update(steps[2], 0.5e-8)  # below 1e-8
    steps[4] = _update(steps[3], 2e-8)  # above 1e-8
    trial = TrialBuilder(tmp_path).series("Net_fc1.weight", steps).write()
    rule = WeightUpdateRatio(trial)
    assert fired_steps(rule) == [1, 3]
    large, small = evidence_of(rule)
    assert large.value == pytest.approx(10.5)
    assert "> large_threshold 10" in large.message
    assert small.value == pytest.approx(0.5e-8, rel=1e-3)
    assert "between TRAIN step 2 and TRAIN step 3" in small.message


def test_weight_update_ratio_num_steps_compares_with_the_earliest_step_in_reach(
    tmp_path: Path,
) -> None:
    # The weight grows by 3 % a step: 1-step ratios are 0.03; over two steps about 0.061.
    steps = {step: np.array([1.0, 1.0]) * 1.03**step for step in range(5)}
    trial = TrialBuilder(tmp_path).series("Net_fc1.weight", steps).write()
    assert fired_steps(WeightUpdateRatio(trial, large_threshold=0.05)) == []
    rule = WeightUpdateRatio(trial, num_steps=2, large_threshold=0.05)
    assert fired_steps(rule) == [2, 3, 4]
    assert "between TRAIN step 2 and TRAIN step 4" in evidence_of(rule)[-1].message


def test_weight_update_ratio_frozen_weights_and_eval_steps(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "Net_fc1.weight", [1.0, 2.0], TRAIN)
        .add(1, "Net_fc1.weight", [1.1, 2.2], TRAIN)
        .add(2, "Net_fc1.weight", [1.1, 2.2], EVAL)
        .add(3, "Net_fc1.weight", [1.2, 2.4], TRAIN)
        .add(4, "Net_fc1.weight", [1.2, 2.4], TRAIN)
        .write()
    )
    # The EVAL step is not fed to the rule: step 3 is compared with step 1, not 2.
    assert fired_steps(WeightUpdateRatio(trial)) == [4]


def test_poor_weight_initialization_activation_variance_ratio(tmp_path: Path) -> None:
    def spread(variance: float) -> np.ndarray:
        return np.array([-1.0, 1.0]) * np.sqrt(variance)

    trial = (
        TrialBuilder(tmp_path)
        .add(0, "relu1.relu_input_0", spread(1.0))
        .add(0, "relu2.relu_input_0", spread(1 / 10.5))
        .add(1, "relu1.relu_input_0", spread(1.0))
        .add(1, "relu2.relu_input_0", spread(1 / 9.5))
        .write()
    )
    rule = PoorWeightInitialization(trial)
    assert fired_steps(rule) == [0]
    (evidence,) = evidence_of(rule)
    assert evidence.value == pytest.approx(10.5)
    assert evidence.tensor == "relu2.relu_input_0"


def test_poor_weight_initialization_gradient_spread(tmp_path: Path) -> None:
    # Evenly spread values from 1 to 1 + top: the 5th-95th percentile spread is 0.9 * top.
    trial = (
        TrialBuilder(tmp_path)
        .add(0, GRAD, 1.0 + np.linspace(0.0, 0.0009 / 0.9 * 0.99, 101))
        .add(1, GRAD, 1.0 + np.linspace(0.0, 0.0009 / 0.9 * 1.01, 101))
        .collection("gradients", regex=["^gradient"])
        .write()
    )
    rule = PoorWeightInitialization(trial, distribution_range=0.0009)
    assert fired_steps(rule) == [0]
    assert evidence_of(rule)[0].value == pytest.approx(0.0009 * 0.99)


def test_poor_weight_initialization_leaves_out_gradients_exactly_zero(tmp_path: Path) -> None:
    """Most of an embedding's rows are not looked up in a batch: their gradient is exactly 0,
    which says nothing of the initialisation."""
    embedding = np.zeros(1000)
    embedding[:100] = np.linspace(-0.01, 0.01, 100)
    trial = TrialBuilder(tmp_path).add(0, "gradient/Net_embedding.weight", embedding).write()
    assert fired_steps(PoorWeightInitialization(trial)) == []
    dead = TrialBuilder(tmp_path / "dead").add(0, GRAD, np.zeros(100)).write()
    assert fired_steps(PoorWeightInitialization(dead)) == [0]


def test_weight_update_ratio_sets_aside_a_weight_that_was_zero(tmp_path: Path) -> None:
    """A zero-initialised BatchNorm weight: its first update has no size to be compared with."""
    norm, conv = "Net_block.bn2.weight", "Net_block.conv.weight"
    trial = (
        TrialBuilder(tmp_path)
        .series(norm, {0: np.zeros(4), 1: np.full(4, 0.01), 2: np.full(4, 0.011)})
        .series(conv, {0: np.ones(4), 1: np.full(4, 1.01), 2: np.full(4, 1.02)})
        .write()
    )
    rule = WeightUpdateRatio(trial)
    assert fired_steps(rule) == []
    (remark,) = rule.remarks()
    assert remark == (
        "Set aside weights that were exactly 0 at the earlier step (zero-initialised, as the last "
        "BatchNorm of a timm residual block: an update has no size to be compared with), at "
        f"TRAIN step 1: {norm}."
    )


def test_poor_weight_initialization_loss_patience_and_steps(tmp_path: Path) -> None:
    flat = scalars([1.0, 1.1, 1.1, 1.1, 1.1, 1.1])
    improving_once = scalars([1.0, 1.1, 1.1, 1.1, 0.9, 1.1, 1.1, 1.1, 1.1, 1.1])
    stalled = TrialBuilder(tmp_path / "a").series("CrossEntropyLoss_output_0", flat).write()
    assert fired_steps(PoorWeightInitialization(stalled)) == [5]
    assert fired_steps(PoorWeightInitialization(stalled, patience=6)) == []
    assert fired_steps(PoorWeightInitialization(stalled, steps=5)) == []
    recovered = (
        TrialBuilder(tmp_path / "b").series("CrossEntropyLoss_output_0", improving_once).write()
    )
    assert fired_steps(PoorWeightInitialization(recovered)) == [9]
