"""LossNotDecreasing, Overfit and Overtraining on hand-made trials.

Each trial is written step by step as the hook writes it: TRAIN steps, and EVAL passes (the EVAL
steps between two training steps), each step with its mode and its step in that mode. The real
trainings are in ``test_loss_rules_trainings.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from builtin_trials import EVAL, TRAIN, TrialBuilder, evidence_of, fired_steps, scalars

from trainprobe.analysis.trial import Trial
from trainprobe.config.errors import ConfigError
from trainprobe.rules import InsufficientInformationForRuleInvocation
from trainprobe.rules.builtin import LossNotDecreasing, Overfit, Overtraining
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner

LOSS = "CrossEntropyLoss_output_0"


def phases(path: Path, parts: Sequence[tuple[str, Sequence[float]]]) -> Trial:
    """A trial of ``parts``: ("train", losses) saves one TRAIN step per loss, ("eval", losses)
    one evaluation pass of as many EVAL steps."""
    builder = TrialBuilder(path)
    step = 0
    for kind, losses in parts:
        for loss in losses:
            builder.add(step, LOSS, loss, TRAIN if kind == "train" else EVAL)
            step += 1
    return builder.write()


# ----- LossNotDecreasing ---------------------------------------------------------------------


def test_loss_not_decreasing_compares_means_not_single_batches(tmp_path: Path) -> None:
    """A loss that falls by 0.01 a step, with a bad batch (+0.1) at every tenth step: step 10's
    batch alone is as high as step 0's, which fired before smoothing."""
    losses = {
        step: 1.0 - 0.01 * step + (0.1 if step and step % 10 == 0 else 0.0) for step in range(41)
    }
    trial = TrialBuilder(tmp_path).series(LOSS, losses).write()
    assert losses[10] == pytest.approx(losses[0])
    assert fired_steps(LossNotDecreasing(trial)) == []
    flat = TrialBuilder(tmp_path / "flat").series(LOSS, dict.fromkeys(range(25), 0.5)).write()
    rule = LossNotDecreasing(flat)
    # The first comparison needs 5 losses on each side, the newest at least 10 steps apart:
    # TRAIN steps 10-14 against 0-4; then every num_steps.
    assert fired_steps(rule) == [14, 24]
    assert evidence_of(rule)[0].message == (
        f"{LOSS}: the loss went from 0.5 (mean of 5 saved, TRAIN steps 0-4) to 0.5 (mean of 5 "
        "saved, TRAIN steps 10-14), down 0% < diff_percent 0.1%"
    )


def _two_windows(path: Path, before: float, after: float) -> Trial:
    losses = {step: before for step in range(5)} | {step: after for step in range(10, 15)}
    return TrialBuilder(path).series(LOSS, losses).write()


def test_loss_not_decreasing_diff_percent_boundary(tmp_path: Path) -> None:
    rule = LossNotDecreasing(_two_windows(tmp_path / "a", 1.0, 0.9991))
    assert fired_steps(rule) == [14]
    assert "down 0.09% < diff_percent 0.1%" in evidence_of(rule)[0].message
    assert fired_steps(LossNotDecreasing(_two_windows(tmp_path / "b", 1.0, 0.9989))) == []


def test_loss_not_decreasing_increase_threshold_boundary(tmp_path: Path) -> None:
    assert fired_steps(LossNotDecreasing(_two_windows(tmp_path / "a", 1.0, 1.045))) == []
    trial = _two_windows(tmp_path / "up", 1.0, 1.055)
    rule = LossNotDecreasing(trial)
    assert fired_steps(rule) == [14]
    assert "up 5.5% > increase_threshold_percent 5%" in evidence_of(rule)[0].message
    assert fired_steps(LossNotDecreasing(trial, increase_threshold_percent=6)) == []


def test_loss_not_decreasing_fires_on_a_loss_that_is_not_finite(tmp_path: Path) -> None:
    losses = {0: 2.0, 1: 1.5, 2: float("nan"), 3: float("inf")}
    rule = LossNotDecreasing(TrialBuilder(tmp_path).series(LOSS, losses).write())
    # Far from its first comparison, yet NaN and infinity are issues at once.
    assert fired_steps(rule) == [2, 3]
    messages = [item.message for item in evidence_of(rule)]
    assert messages == [
        f"{LOSS}: the loss is nan at TRAIN step 2",
        f"{LOSS}: the loss is inf at TRAIN step 3",
    ]


def test_loss_not_decreasing_waits_for_the_values_its_smoothing_needs(tmp_path: Path) -> None:
    """Two noisy single losses are never compared: with 3 saved the rule waits, and says that
    more losses, not a lower num_steps, would let it judge."""
    trial = TrialBuilder(tmp_path).series(LOSS, scalars([1.371, 1.718, 1.5])).write()
    rule = LossNotDecreasing(trial, num_steps=1)
    for step in trial.steps():
        with pytest.raises(InsufficientInformationForRuleInvocation) as waiting:
            rule.evaluate(step)
    assert waiting.value.message == (
        f"waiting for losses to compare: {LOSS}: 3 training loss(es) up to TRAIN step 2, 10 "
        "needed (each side of a comparison averages 5): run longer, or save the losses more "
        "often"
    )
    # Enough losses, too close together for num_steps: the advice names the num_steps that
    # would do, and it does.
    twelve = TrialBuilder(tmp_path / "b").series(LOSS, scalars([1.0 - 0.02 * i for i in range(12)]))
    trial = twelve.write()
    rule = LossNotDecreasing(trial)
    for step in trial.steps():
        with pytest.raises(InsufficientInformationForRuleInvocation) as waiting:
            rule.evaluate(step)
    assert waiting.value.message.endswith(
        "so far that gap is at most 5 TRAIN steps: run longer, or lower num_steps to 5"
    )
    rule = LossNotDecreasing(trial, num_steps=5)
    assert fired_steps(rule) == []
    assert rule.has_judged


def test_loss_not_decreasing_never_compares_batches_of_one_evaluation_pass(
    tmp_path: Path,
) -> None:
    """One long evaluation pass, fixed weights, so a flat loss over its 40 batches: it is one
    value, and the training loss keeps falling; nothing fires."""
    falling = [2.0 - 0.04 * i for i in range(40)]
    trial = phases(
        tmp_path, [("train", falling[:20]), ("eval", [1.2] * 40), ("train", falling[20:])]
    )
    rule = LossNotDecreasing(trial)
    assert fired_steps(rule) == []
    assert rule.has_judged
    # The passes were never compared (there was one): the status says so.
    (remark,) = rule.remarks()
    assert remark == (
        f"The evaluation passes of {LOSS} were never compared: 1 EVAL pass(es) holding 40 saved "
        "loss(es) in all up to EVAL steps 0-39 (steps 20-59): a pass is compared with the passes "
        "before it, each side averaging passes that hold 5 losses or more: run longer (more "
        "evaluation passes)."
    )


def test_loss_not_decreasing_compares_evaluation_passes_by_their_means(tmp_path: Path) -> None:
    """Passes of 10 batches: each is one value, its mean; the second pass's mean is 6.7 %
    above the first's, 10 EVAL steps later. The pass is judged when complete, here at the end
    of the training."""
    first = [3.0 + (0.02 if i % 2 else -0.02) for i in range(10)]
    second = [3.2 + (0.02 if i % 2 else -0.02) for i in range(10)]
    falling = [2.0 - 0.05 * i for i in range(20)]
    trial = phases(
        tmp_path / "two",
        [("train", falling[:10]), ("eval", first), ("train", falling[10:]), ("eval", second)],
    )
    rule = LossNotDecreasing(trial)
    assert fired_steps(rule) == [39]
    (evidence,) = evidence_of(rule)
    assert evidence.message == (
        f"{LOSS}: the validation loss went from 3 (evaluation pass of 10 saved, EVAL steps 0-9 "
        "(steps 10-19)) to 3.2 (evaluation pass of 10 saved, EVAL steps 10-19 (steps 30-39)), up "
        "6.667% > increase_threshold_percent 5% beyond the batches' noise (+/- 0.6285%)"
    )
    # The same means with batches spread ten times wider: a rise within their noise.
    wide = phases(
        tmp_path / "wide",
        [
            ("train", falling[:10]),
            ("eval", [3.0 + 10 * (x - 3.0) for x in first]),
            ("train", falling[10:]),
            ("eval", [3.2 + 10 * (x - 3.2) for x in second]),
        ],
    )
    rule = LossNotDecreasing(wide)
    assert fired_steps(rule) == []
    (remark,) = rule.remarks()
    assert remark.startswith(
        "Set aside rises above increase_threshold_percent only within the batches' noise"
    )
    # TRAIN alone: the training losses fall. EVAL alone: the same comparison.
    assert fired_steps(LossNotDecreasing(trial, mode="TRAIN", num_steps=5)) == []
    assert fired_steps(LossNotDecreasing(trial, mode="eval")) == [39]


def test_loss_not_decreasing_rejects_a_bad_mode(tmp_path: Path) -> None:
    trial = TrialBuilder(tmp_path).add(0, LOSS, 1.0).write()
    with pytest.raises(ConfigError, match=r"LossNotDecreasing\.mode"):
        LossNotDecreasing(trial, mode="TEST")


# ----- Overfit -------------------------------------------------------------------------------


def test_overfit_ratio_threshold_boundary(tmp_path: Path) -> None:
    """Training losses all 1.0, one pass of 5 equal batches: no noise, SageMaker's formula."""
    above = phases(tmp_path / "a", [("train", [1.0] * 5), ("eval", [1.12] * 5)])
    rule = Overfit(above)
    assert fired_steps(rule) == [9]
    (evidence,) = evidence_of(rule)
    assert evidence.value == pytest.approx(0.12)
    assert evidence.threshold == 0.1
    assert evidence.step == 9
    below = phases(tmp_path / "b", [("train", [1.0] * 5), ("eval", [1.08] * 5)])
    assert fired_steps(Overfit(below)) == []


def test_the_runner_judges_the_pass_the_training_s_end_completes(tmp_path: Path) -> None:
    """The only evaluation pass is the last thing saved: complete once the training has ended,
    judged then, as one more evaluation of the last step."""
    trial = phases(tmp_path, [("train", [1.0] * 5), ("eval", [1.12] * 5)])
    definition = RuleDefinition.for_builtin("Overfit", {})
    verdict = RuleRunner(definition, trial.path, output_dir=str(tmp_path / "rules")).run()[0]
    assert verdict.status == "IssuesFound", verdict.details
    assert verdict.details.startswith("Overfit found an issue at EVAL step 4 (step 9): ")
    assert "at the evaluation pass of EVAL steps 0-4 (steps 5-9)" in verdict.details
    lines = (tmp_path / "rules" / "Overfit" / "evaluations.jsonl").read_text().splitlines()
    assert [json.loads(line)["result"] for line in lines][-2:] == ["Skipped", "IssuesFound"]


def test_overfit_counts_only_a_gap_beyond_the_batches_noise(tmp_path: Path) -> None:
    """Noisy training batches (standard error 0.035): a validation loss 16 % above the
    training loss is within two standard errors of ratio_threshold, 18 % is beyond."""
    train = [0.9, 1.1, 1.0, 0.95, 1.05]
    within = Overfit(phases(tmp_path / "a", [("train", train), ("eval", [1.16] * 5)]))
    assert fired_steps(within) == []
    (remark,) = within.remarks()
    assert remark.startswith(
        "Set aside evaluation passes whose validation loss was above ratio_threshold only "
        "within the batches' noise"
    )
    beyond = Overfit(phases(tmp_path / "b", [("train", train), ("eval", [1.18] * 5)]))
    assert fired_steps(beyond) == [9]
    assert "beyond the batches' noise (+/- 0.07071)" in evidence_of(beyond)[0].message


def test_overfit_patience_counts_evaluation_passes(tmp_path: Path) -> None:
    parts = [("train", [1.0] * 5), ("eval", [1.2] * 5)] * 3
    trial = phases(tmp_path, parts)
    # Steps: 0-4 train, 5-9 eval, 10-14 train, 15-19 eval, 20-24 train, 25-29 eval; each pass
    # is judged at the training step that completes it (the last one at the end).
    assert fired_steps(Overfit(trial)) == [10, 20, 29]
    assert fired_steps(Overfit(trial, patience=2)) == [20, 29]
    assert fired_steps(Overfit(trial, patience=2, start_step=10)) == [29]
    rule = Overfit(trial, patience=2)
    fired_steps(rule)
    message = evidence_of(rule)[0].message
    assert "at the evaluation pass of EVAL steps 5-9 (steps 15-19), 2 evaluation(s) in a row" in (
        message
    )


def test_overfit_waits_for_single_batch_passes_to_hold_five_losses(tmp_path: Path) -> None:
    """One EVAL batch after every 5 training steps: the newest 5 passes are averaged."""
    parts: list[tuple[str, list[float]]] = []
    for _ in range(6):
        parts += [("train", [1.0] * 5), ("eval", [1.3])]
    rule = Overfit(phases(tmp_path, parts))
    # Passes complete at steps 6, 12, 18, 24, 30 (the TRAIN step after each); the fifth is
    # the first judged; the sixth completes at the end (step 35).
    assert fired_steps(rule) == [30, 35]
    assert "validation 1.3 (mean of 5 evaluation passes, EVAL steps 0-4 (steps 5-29))" in (
        evidence_of(rule)[0].message
    )


# ----- Overtraining --------------------------------------------------------------------------


def test_overtraining_follows_the_mean_of_five_training_losses(tmp_path: Path) -> None:
    # A flat loss: its first mean (TRAIN step 4) is its best; 5 more without a better one.
    flat = Overtraining(TrialBuilder(tmp_path / "flat").series(LOSS, scalars([1.0] * 12)).write())
    assert fired_steps(flat) == [9, 10, 11]
    assert evidence_of(flat)[0].message == (
        f"{LOSS}: the training loss has not improved by more than delta 0.01 on its best 1 for 5 "
        "saved steps (patience_train 5), as of TRAIN step 9: now 1 (mean of 5 saved, TRAIN steps "
        "5-9)"
    )
    # A loss falling by 0.05 a step: a new best at every step; by more than 0.3 (delta), its
    # mean (first at TRAIN step 4) only every 7 steps (at 11, 18): 5 steps without, twice.
    falling = TrialBuilder(tmp_path / "f").series(LOSS, scalars([2 - 0.05 * i for i in range(20)]))
    trial = falling.write()
    assert fired_steps(Overtraining(trial)) == []
    assert fired_steps(Overtraining(trial, delta=0.3)) == [9, 10, 16, 17]


def test_overtraining_validation_patience_counts_passes_not_batches(tmp_path: Path) -> None:
    # One long pass over fixed weights: one value, however many batches.
    falling = [1.0 - 0.05 * i for i in range(30)]
    long_pass = phases(tmp_path / "long", [("train", falling[:10]), ("eval", [0.5] * 40)])
    assert fired_steps(Overtraining(long_pass)) == []
    # Single-batch passes: the first mean after 5 passes, then patience_validation 10 more.
    parts: list[tuple[str, list[float]]] = []
    for index in range(15):
        parts += [("train", falling[2 * index : 2 * index + 2]), ("eval", [0.5])]
    rule = Overtraining(phases(tmp_path / "passes", parts))
    assert fired_steps(rule) == [44]
    assert "for 10 evaluation passes (patience_validation 10)" in evidence_of(rule)[0].message
