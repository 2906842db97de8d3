"""LossNotDecreasing, Overfit and Overtraining on hand-made trials.

The LossNotDecreasing vectors are those of smdebug's deleted first-party rule tests
(reference/smdebug.md §4.3): two scalar tensors ``loss_0`` and ``loss_1`` saved every 4 steps,
listed in the ``default`` and ``gradients`` collections.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_trials import EVAL, TRAIN, TrialBuilder, evidence_of, fired_steps, scalars

from trainprobe.config.errors import ConfigError
from trainprobe.rules import InsufficientInformationForRuleInvocation
from trainprobe.rules.builtin import LossNotDecreasing, Overfit, Overtraining

LOSS = "CrossEntropyLoss_output_0"


def _old_vector(path: Path, values: list[float]) -> TrialBuilder:
    builder = TrialBuilder(path)
    for name in ("loss_0", "loss_1"):
        builder.series(name, scalars([[v] for v in values], every=4))
    names = ["loss_0", "loss_1"]
    return builder.collection("default", names=names).collection("gradients", names=names)


def test_loss_not_decreasing_old_vector_default(tmp_path: Path) -> None:
    """smdebug's vector fired at step 12, comparing step 12's 0.30 with step 0's 0.30. Smoothed,
    step 12 compares the mean of steps 8 and 12 (0.305) with step 0's 0.3: up 1.7 %, within
    increase_threshold_percent."""
    trial = _old_vector(tmp_path, [0.3, 0.33, 0.31, 0.30, 0.28]).write()
    rules = [
        LossNotDecreasing(trial, tensor_regex="loss, losses"),
        LossNotDecreasing(trial, collection_names=["default"]),
        LossNotDecreasing(trial),
    ]
    for rule in rules:
        assert fired_steps(rule) == []


def test_loss_not_decreasing_old_vector_min_diff(tmp_path: Path) -> None:
    """smdebug's old test expected the first firing at step 24 with diff_percent=20, and so it
    is: the mean of steps 16-24 (0.3) is 3.2 % below that of steps 0-12 (0.31)."""
    trial = _old_vector(tmp_path, [0.3, 0.33, 0.31, 0.30, 0.28, 0.2, 0.42]).write()
    rule = LossNotDecreasing(trial, diff_percent=20)
    assert fired_steps(rule) == [24]
    evidence = evidence_of(rule)
    assert {item.tensor for item in evidence} == {"loss_0", "loss_1"}
    assert evidence[0].message == (
        "loss_0: the loss went from 0.31 (mean of 4 saved, steps 0-12) to 0.3 (mean of 3 saved, "
        "steps 16-24), down 3.226% < diff_percent 20%"
    )


def test_loss_not_decreasing_compares_means_not_single_batches(tmp_path: Path) -> None:
    """A loss that falls by 0.01 a step, with a bad batch (+0.1) at every tenth step: step 10's
    batch alone is as high as step 0's, which fired before smoothing."""
    losses = {
        step: 1.0 - 0.01 * step + (0.1 if step and step % 10 == 0 else 0.0) for step in range(31)
    }
    trial = TrialBuilder(tmp_path).series(LOSS, losses).write()
    assert losses[10] == pytest.approx(losses[0])
    assert fired_steps(LossNotDecreasing(trial)) == []
    flat = TrialBuilder(tmp_path / "flat").series(LOSS, dict.fromkeys(range(21), 0.5)).write()
    rule = LossNotDecreasing(flat)
    assert fired_steps(rule) == [10, 20]
    first = evidence_of(rule)[0].message
    assert first == (
        f"{LOSS}: the loss went from 0.5 at step 0 to 0.5 (mean of 5 saved, steps 6-10), "
        "down 0% < diff_percent 0.1%"
    )


def test_loss_not_decreasing_diff_percent_boundary(tmp_path: Path) -> None:
    def fired(after: float) -> list[int]:
        trial = TrialBuilder(tmp_path / str(after)).series(LOSS, {0: 1.0, 10: after}).write()
        return fired_steps(LossNotDecreasing(trial))

    rule = LossNotDecreasing(
        TrialBuilder(tmp_path / "a").series(LOSS, {0: 1.0, 10: 0.9991}).write()
    )
    assert fired_steps(rule) == [10]
    assert "down 0.09% < diff_percent 0.1%" in evidence_of(rule)[0].message
    assert fired(0.9989) == []


def test_loss_not_decreasing_increase_threshold_boundary(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).series(LOSS, {0: 1.0, 10: 1.045}).write()
    assert fired_steps(LossNotDecreasing(trial)) == []
    trial = TrialBuilder(tmp_path / "up").series(LOSS, {0: 1.0, 10: 1.055}).write()
    rule = LossNotDecreasing(trial)
    assert fired_steps(rule) == [10]
    assert "up 5.5% > increase_threshold_percent 5%" in evidence_of(rule)[0].message
    assert fired_steps(LossNotDecreasing(trial, increase_threshold_percent=6)) == []


def test_loss_not_decreasing_fires_on_a_loss_that_is_not_finite(tmp_path: Path) -> None:
    losses = {0: 2.0, 1: 1.5, 2: float("nan"), 3: float("inf")}
    rule = LossNotDecreasing(TrialBuilder(tmp_path).series(LOSS, losses).write())
    # Not yet due for a comparison (num_steps 10), yet NaN and infinity are issues at once.
    assert fired_steps(rule) == [2, 3]
    messages = [item.message for item in evidence_of(rule)]
    assert messages == [f"{LOSS}: the loss is nan at step 2", f"{LOSS}: the loss is inf at step 3"]


def test_loss_not_decreasing_judges_nothing_before_its_first_comparison(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).series(LOSS, scalars([1.0, 0.9, 0.8], every=4)).write()
    rule = LossNotDecreasing(trial)
    for step in trial.steps():
        with pytest.raises(
            InsufficientInformationForRuleInvocation, match="num_steps 10 steps apart"
        ):
            rule.evaluate(step)
    longer = TrialBuilder(tmp_path / "b").series(LOSS, scalars([1.0, 0.9, 0.8, 0.7, 0.6], every=4))
    rule = LossNotDecreasing(longer.write())
    for step in (0, 4, 8):
        with pytest.raises(InsufficientInformationForRuleInvocation):
            rule.evaluate(step)
    assert rule.evaluate(12) is False  # the first comparison: judged
    assert rule.evaluate(16) is False  # not due, but judged: no NaN, and the history grows


def test_loss_not_decreasing_in_one_mode_counts_that_mode_s_steps(tmp_path: Path) -> None:
    builder = TrialBuilder(tmp_path)
    for step in range(10):
        builder.add(step, LOSS, 1.0 - 0.05 * step, TRAIN)
    builder.add(10, LOSS, 3.0, EVAL)
    for step in range(11, 21):
        builder.add(step, LOSS, 0.5 - 0.02 * (step - 11), TRAIN)
    builder.add(21, LOSS, 3.2, EVAL)
    trial = builder.write()
    # GLOBAL counts every step, each mode's losses apart: the TRAIN losses keep decreasing;
    # the EVAL losses at steps 10 and 21 (11 steps apart) rose 6.7 %.
    rule = LossNotDecreasing(trial, num_steps=5)
    assert fired_steps(rule) == [21]
    assert evidence_of(rule)[0].message == (
        f"{LOSS}: the validation loss went from 3 at step 10 to 3.2 at step 21, up 6.667% > "
        "increase_threshold_percent 5%"
    )
    # TRAIN steps count as TRAIN steps 0-19, and keep decreasing.
    assert fired_steps(LossNotDecreasing(trial, num_steps=5, mode="TRAIN")) == []
    # The EVAL steps are EVAL steps 0 and 1: 3.0 then 3.2, up 6.7 %.
    rule = LossNotDecreasing(trial, num_steps=1, mode="eval")
    assert fired_steps(rule) == [21]
    assert "at step 10 to 3.2 at step 21" in evidence_of(rule)[0].message


def test_loss_not_decreasing_rejects_a_bad_mode(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).add(0, LOSS, 1.0).write()
    with pytest.raises(ConfigError, match=r"LossNotDecreasing\.mode"):
        LossNotDecreasing(trial, mode="TEST")


def _phases(path: Path, train: list[float], validation: list[float], repeat: int = 1):
    builder = TrialBuilder(path)
    step = 0
    for _ in range(repeat):
        for value in train:
            builder.add(step, LOSS, value, TRAIN)
            step += 1
        for value in validation:
            builder.add(step, LOSS, value, EVAL)
            step += 1
    return builder.write()


def test_overfit_ratio_threshold_boundary(tmp_path: Path) -> None:
    # Mean training loss 1.0; validation means 1.12 (ratio 0.12) and 1.08 (0.08).
    above = _phases(tmp_path / "a", [0.9, 1.1, 1.0], [1.12])
    below = _phases(tmp_path / "b", [0.9, 1.1, 1.0], [1.08])
    rule = Overfit(above)
    assert fired_steps(rule) == [3]
    (evidence,) = evidence_of(rule)
    assert evidence.value == pytest.approx(0.12)
    assert evidence.threshold == 0.1
    assert fired_steps(Overfit(below)) == []


def test_overfit_patience_and_start_step(tmp_path: Path) -> None:
    trial = _phases(tmp_path, [1.0, 1.0], [1.2, 1.2], repeat=2)
    # Steps: 0-1 train, 2-3 eval, 4-5 train, 6-7 eval.
    assert fired_steps(Overfit(trial)) == [2, 3, 6, 7]
    assert fired_steps(Overfit(trial, patience=2)) == [3, 6, 7]
    assert fired_steps(Overfit(trial, patience=3, start_step=3)) == [7]


def test_overtraining_training_loss_patience_and_delta(tmp_path: Path) -> None:
    # Improves by 0.02, then by 0.011 (a new optimum), then never more than 0.01 below 0.969.
    values = [1.0, 0.98, 0.969, 0.962, 0.960, 0.9595, 0.965, 0.961]
    trial = TrialBuilder(tmp_path).series(LOSS, scalars(values)).write()
    rule = Overtraining(trial)
    # No new optimum after step 2: steps 3-7 are 5 steps without one.
    assert fired_steps(rule) == [7]
    assert "patience_train 5" in evidence_of(rule)[0].message
    assert fired_steps(Overtraining(trial, delta=0.005)) == []


def test_overtraining_validation_loss_patience(tmp_path: Path) -> None:
    builder = TrialBuilder(tmp_path)
    for step in range(12):
        builder.add(2 * step, LOSS, 1.0 - 0.1 * step, TRAIN)
        builder.add(2 * step + 1, LOSS, 0.5 + 0.01 * step, EVAL)
    trial = builder.write()
    rule = Overtraining(trial)
    # The validation loss is best at its first step; its 10th step without a new optimum is
    # EVAL step 10, global step 21.
    assert fired_steps(rule) == [21, 23]
    assert "validation loss" in evidence_of(rule)[0].message
