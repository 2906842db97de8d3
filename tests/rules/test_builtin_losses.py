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
from trainprobe.rules.builtin import LossNotDecreasing, Overfit, Overtraining

LOSS = "CrossEntropyLoss_output_0"


def _old_vector(path: Path, values: list[float]) -> TrialBuilder:
    builder = TrialBuilder(path)
    for name in ("loss_0", "loss_1"):
        builder.series(name, scalars([[v] for v in values], every=4))
    names = ["loss_0", "loss_1"]
    return builder.collection("default", names=names).collection("gradients", names=names)


def test_loss_not_decreasing_old_vector_default(tmp_path: Path) -> None:
    trial = _old_vector(tmp_path, [0.3, 0.33, 0.31, 0.30, 0.28]).write()
    rules = [
        LossNotDecreasing(trial, tensor_regex="loss, losses"),
        LossNotDecreasing(trial, collection_names=["default"]),
        LossNotDecreasing(trial),
    ]
    for rule in rules:
        # Step 12 is the first with a loss at least 10 steps back (step 0, also 0.30); the
        # next check is due at step 22 or later, so step 16 is not checked.
        assert fired_steps(rule) == [12]
        evidence = evidence_of(rule)
        assert {item.tensor for item in evidence} == {"loss_0", "loss_1"}
        assert "went from 0.3 at step 0 to 0.3 at step 12" in evidence[0].message


def test_loss_not_decreasing_old_vector_min_diff(tmp_path: Path) -> None:
    """smdebug's old test expected the first firing at step 24 with diff_percent=20; under the
    spec's reading of diff_percent (the minimum decrease), step 12's flat loss fires as well.
    Step 24 fires because the loss rose 40 % over step 12's."""
    trial = _old_vector(tmp_path, [0.3, 0.33, 0.31, 0.30, 0.28, 0.2, 0.42]).write()
    rule = LossNotDecreasing(trial, diff_percent=20)
    assert fired_steps(rule) == [12, 24]
    last = evidence_of(rule)[-1]
    assert last.step == 24
    assert "up 40% > increase_threshold_percent 5%" in last.message


def test_loss_not_decreasing_diff_percent_boundary(tmp_path: Path) -> None:
    # Checks at steps 10, 20, 30: down 0.09 %, down 0.11 %, down 0.1 % exactly.
    losses = {0: 1.0, 10: 1.0 - 0.0009, 20: (1.0 - 0.0009) * (1 - 0.0011)}
    losses[30] = losses[20] * (1 - 0.001)
    trial = TrialBuilder(tmp_path).series(LOSS, losses).write()
    rule = LossNotDecreasing(trial)
    assert fired_steps(rule) == [10]
    assert "down 0.09% < diff_percent 0.1%" in evidence_of(rule)[0].message


def test_loss_not_decreasing_increase_threshold_boundary(tmp_path: Path) -> None:
    losses = {0: 1.0, 10: 1.045, 20: 1.045 * 1.055}
    trial = TrialBuilder(tmp_path).series(LOSS, losses).write()
    assert fired_steps(LossNotDecreasing(trial)) == [20]
    assert fired_steps(LossNotDecreasing(trial, increase_threshold_percent=6)) == []


def test_loss_not_decreasing_in_one_mode_counts_that_mode_s_steps(tmp_path: Path) -> None:
    builder = TrialBuilder(tmp_path)
    for step in range(10):
        builder.add(step, LOSS, 1.0 - 0.05 * step, TRAIN)
    builder.add(10, LOSS, 0.9, EVAL)
    for step in range(11, 21):
        builder.add(step, LOSS, 0.5 - 0.02 * (step - 11), TRAIN)
    builder.add(21, LOSS, 0.95, EVAL)
    trial = builder.write()
    # GLOBAL mixes both modes: step 10's EVAL 0.9 is compared with step 5's TRAIN 0.75.
    assert fired_steps(LossNotDecreasing(trial, num_steps=5)) == [10]
    # TRAIN steps count as TRAIN steps 0-19, and keep decreasing.
    assert fired_steps(LossNotDecreasing(trial, num_steps=5, mode="TRAIN")) == []
    # The EVAL steps are EVAL steps 0 and 1: 0.9 then 0.95, up 5.6 %.
    rule = LossNotDecreasing(trial, num_steps=1, mode="eval")
    assert fired_steps(rule) == [21]
    assert "at step 10 to 0.95 at step 21" in evidence_of(rule)[0].message


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
