"""Every built-in rule that applies to PyTorch, on real trainings written by trainprobe's hook.

Each test trains twice, changing one thing: the training that exhibits the condition must make
the rule fire, the one that does not must leave it silent. Rules are evaluated over the saved
steps in order (``fired_steps``), as the runner does.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from builtin_training import Data, Run, classes, mlp, train
from builtin_trials import evidence_of, fired_steps
from torch import nn

from trainprobe.rules.builtin import (
    AllZero,
    CheckInputImages,
    ClassImbalance,
    Confusion,
    DeadRelu,
    ExplodingTensor,
    LossNotDecreasing,
    NLPSequenceRatio,
    Overfit,
    Overtraining,
    PoorWeightInitialization,
    SaturatedActivation,
    SimilarAcrossRuns,
    StalledTrainingRule,
    TensorVariance,
    UnchangedTensor,
    VanishingGradient,
    WeightUpdateRatio,
)
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

DATA = classes(64, 8, seed=0)
EVERYTHING = ("weights", "biases", "gradients", "losses")


def test_exploding_tensor_with_a_learning_rate_too_high(tmp_path: Path) -> None:
    run = Run(steps=8, collections=EVERYTHING)
    exploding = train(tmp_path / "a", mlp([8, 32, 2]), DATA, replace(run, lr=1e5))
    rule = ExplodingTensor(exploding)
    assert fired_steps(rule)
    assert any("NaN" in item.message for item in evidence_of(rule))
    fine = train(tmp_path / "b", mlp([8, 32, 2]), DATA, run)
    assert fired_steps(ExplodingTensor(fine)) == []


def _negative_bias(linear: nn.Linear) -> None:
    nn.init.constant_(linear.bias, -10.0)


def test_dead_relu_and_all_zero_with_a_large_negative_bias(tmp_path: Path) -> None:
    run = Run(steps=4, collections=("relu_output", "losses"))
    dead = train(tmp_path / "a", mlp([8, 32, 32, 2], init=_negative_bias), DATA, run)
    rule = DeadRelu(dead)
    assert fired_steps(rule) == dead.steps()
    assert "100% of its 32 units are dead" in evidence_of(rule)[0].message
    assert fired_steps(AllZero(dead, tensor_regex=".*relu_output")) == dead.steps()
    alive = train(tmp_path / "b", mlp([8, 32, 32, 2]), DATA, run)
    assert fired_steps(DeadRelu(alive)) == []
    assert fired_steps(AllZero(alive, tensor_regex=".*relu_output")) == []


class TanhNet(nn.Module):
    """A tanh hidden layer whose inputs are ``scale`` times those of the default init."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(8, 16)
        self.tanh = nn.Tanh()
        self.fc2 = nn.Linear(16, 2)
        with torch.no_grad():
            self.fc1.weight.mul_(scale)
            self.fc1.bias.mul_(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.tanh(self.fc1(x)))


def test_saturated_activation_with_huge_tanh_inputs(tmp_path: Path) -> None:
    run = Run(steps=3, include_regex=[".*tanh_input"])
    saturated = train(tmp_path / "a", TanhNet(1000.0), DATA, run)
    rule = SaturatedActivation(saturated)
    assert fired_steps(rule) == saturated.steps()
    assert evidence_of(rule)[0].tensor == "tanh_input_0"
    fine = train(tmp_path / "b", TanhNet(1.0), DATA, run)
    assert fired_steps(SaturatedActivation(fine)) == []


def _tiny(linear: nn.Linear) -> None:
    nn.init.normal_(linear.weight, std=1e-3)
    nn.init.zeros_(linear.bias)


def _kaiming(linear: nn.Linear) -> None:
    nn.init.kaiming_normal_(linear.weight, nonlinearity="relu")
    nn.init.zeros_(linear.bias)


def test_vanishing_gradient_and_poor_initialization_with_tiny_weights(tmp_path: Path) -> None:
    widths = [8, 32, 32, 32, 32, 2]
    run = Run(steps=10, lr=0.05, collections=("gradients", "relu_input", "losses"))
    tiny = train(tmp_path / "a", mlp(widths, init=_tiny), DATA, run)
    vanishing = VanishingGradient(tiny)
    assert fired_steps(vanishing) == tiny.steps()
    assert evidence_of(vanishing)[0].value < 1e-7
    poor = PoorWeightInitialization(tiny)
    assert fired_steps(poor) == tiny.steps()
    assert "activation input variances differ" in evidence_of(poor)[0].message
    good = train(tmp_path / "b", mlp(widths, init=_kaiming), DATA, run)
    assert fired_steps(VanishingGradient(good)) == []
    assert fired_steps(PoorWeightInitialization(good)) == []


def test_unchanged_tensor_weight_update_ratio_and_loss_with_a_frozen_model(
    tmp_path: Path,
) -> None:
    run = Run(steps=16, collections=("weights", "losses"))
    frozen = train(tmp_path / "a", mlp([8, 16, 2]), DATA, replace(run, train=False))
    unchanged = UnchangedTensor(frozen, collection_names="weights")
    assert fired_steps(unchanged) == frozen.steps()[2:]
    assert "has not changed over 3 saved steps, from TRAIN step 0 to TRAIN step 2" in (
        evidence_of(unchanged)[0].message
    )
    ratio = WeightUpdateRatio(frozen)
    assert fired_steps(ratio) == frozen.steps()[1:]
    assert evidence_of(ratio)[0].value == 0.0
    # The first comparison: the mean of TRAIN steps 10-14 against that of steps 0-4.
    assert fired_steps(LossNotDecreasing(frozen)) == [14]
    learning = train(tmp_path / "b", mlp([8, 16, 2]), DATA, run)
    assert fired_steps(UnchangedTensor(learning, collection_names="weights")) == []
    assert fired_steps(WeightUpdateRatio(learning)) == []
    assert fired_steps(LossNotDecreasing(learning)) == []


def test_tensor_variance_of_weights_initialised_far_too_wide(tmp_path: Path) -> None:
    def wide(linear: nn.Linear) -> None:
        nn.init.normal_(linear.weight, std=10.0)

    run = Run(steps=2, lr=0.0, collections=("weights", "losses"))
    bounds = {"collection_names": "weights", "max_threshold": "10", "min_threshold": "0.00001"}
    too_wide = train(tmp_path / "a", mlp([8, 16, 2], init=wide), DATA, run)
    rule = TensorVariance(too_wide, **bounds)
    assert fired_steps(rule) == too_wide.steps()
    assert evidence_of(rule)[0].value > 10
    fine = train(tmp_path / "b", mlp([8, 16, 2]), DATA, run)
    assert fired_steps(TensorVariance(fine, **bounds)) == []


def test_overfit_and_overtraining_with_a_model_fitted_to_twenty_samples(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(1)
    twenty = Data(torch.randn(20, 8, generator=generator), torch.randint(0, 2, (20,)))
    unseen = Data(torch.randn(200, 8, generator=generator), torch.randint(0, 2, (200,)))
    memorised = train(
        tmp_path / "a",
        mlp([8, 64, 64, 2]),
        twenty,
        Run(steps=60, lr=0.5, eval_data=unseen, eval_every=5),
    )
    assert fired_steps(Overfit(memorised))
    overtraining = Overtraining(memorised)
    assert fired_steps(overtraining)
    assert "has not improved" in evidence_of(overtraining)[0].message
    learning = train(
        tmp_path / "b",
        mlp([8, 64, 64, 2]),
        classes(200, 8, seed=0),
        Run(steps=20, lr=0.02, eval_data=classes(200, 8, seed=1), eval_every=5),
    )
    assert fired_steps(Overfit(learning)) == []
    assert fired_steps(Overtraining(learning)) == []


def test_class_imbalance_and_confusion_with_a_99_to_1_label_split(tmp_path: Path) -> None:
    def labelled(path: Path, balance: tuple[float, float]):
        run = Run(
            steps=10,
            eval_data=classes(1000, 8, seed=1, balance=balance),
            eval_every=10,
            save_labels=True,
        )
        return train(path, mlp([8, 16, 2]), classes(1000, 8, seed=0, balance=balance), run)

    skewed = labelled(tmp_path / "a", (0.99, 0.01))
    imbalance = ClassImbalance(skewed)
    assert fired_steps(imbalance) == [10]
    assert "class 0 has 990 samples and class 1 10" in evidence_of(imbalance)[0].message
    confusion = Confusion(skewed)
    assert fired_steps(confusion) == [10]
    assert "class 1:" in evidence_of(confusion)[0].message
    balanced = labelled(tmp_path / "b", (0.5, 0.5))
    assert fired_steps(ClassImbalance(balanced)) == []
    assert fired_steps(Confusion(balanced)) == []


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = nn.Conv2d(3, 4, 3)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 6 * 6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.relu(self.conv1(x)).flatten(1))


def test_check_input_images_with_unnormalised_images(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    pixels = torch.rand(500, 3, 8, 8, generator=generator)  # in [0, 1), as ToTensor gives
    labels = torch.randint(0, 2, (500,), generator=generator)
    run = Run(steps=5, include_regex=["conv1_input"])
    raw = train(tmp_path / "a", ConvNet(), Data(pixels, labels, batch_size=100), run)
    rule = CheckInputImages(raw, regex="conv1_input_0")
    assert fired_steps(rule) == [4]  # the 500th image arrives at step 4
    assert "over 500 images" in evidence_of(rule)[0].message
    normalised = Data((pixels - 0.5) / 0.29, labels, batch_size=100)
    fine = train(tmp_path / "b", ConvNet(), normalised, run)
    assert fired_steps(CheckInputImages(fine, regex="conv1_input_0")) == []


class Bag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embedding = nn.Embedding(100, 8, padding_idx=0)
        self.fc = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embedding(x).mean(dim=1))


def test_nlp_sequence_ratio_with_padded_sequences(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, 100, (64, 20), generator=generator)
    padded = tokens.clone()
    for row, length in enumerate(torch.randint(2, 7, (64,), generator=generator)):
        padded[row, length:] = 0  # 2 to 6 words, then padding
    labels = torch.randint(0, 2, (64,), generator=generator)
    run = Run(steps=4, include_regex=["embedding_input"])
    mostly_padding = train(tmp_path / "a", Bag(), Data(padded, labels, batch_size=32), run)
    rule = NLPSequenceRatio(mostly_padding, tensor_regex=".*embedding_input_0")
    assert fired_steps(rule) == mostly_padding.steps()
    assert evidence_of(rule)[0].value > 50
    full = train(tmp_path / "b", Bag(), Data(tokens, labels, batch_size=32), run)
    assert fired_steps(NLPSequenceRatio(full, tensor_regex=".*embedding_input_0")) == []


def test_similar_across_runs_with_two_seeds(tmp_path: Path) -> None:
    run = Run(steps=3, collections=EVERYTHING)
    first = train(tmp_path / "a", mlp([8, 16, 2], seed=0), DATA, run)
    same = train(tmp_path / "b", mlp([8, 16, 2], seed=0), DATA, run)
    other_seed = train(tmp_path / "c", mlp([8, 16, 2], seed=1), DATA, run)
    assert fired_steps(SimilarAcrossRuns(first, other_trials=[same])) == []
    rule = SimilarAcrossRuns(first, str(tmp_path / "c"))
    assert fired_steps(rule) == first.steps()
    assert "Net_layer0.fc.weight differs from c's at TRAIN step 0" in [
        item.message.split(" (")[0] for item in evidence_of(rule)
    ]
    assert other_seed.steps() == first.steps()


SCRIPT = Path(__file__).with_name("stalling_training.py")


def _start(out: Path, *options: str) -> subprocess.Popen[str]:
    command = [sys.executable, str(SCRIPT), str(out), *options]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def _watch(rule: StalledTrainingRule, script: subprocess.Popen[str], seconds: float) -> bool:
    """Ask the rule every 0.1 s while the script runs (for at most ``seconds``)."""
    deadline = time.monotonic() + seconds
    while script.poll() is None and time.monotonic() < deadline:
        if rule.check_progress():
            return True
        time.sleep(0.1)
    return False


def test_stalled_training_rule_with_a_script_that_stops_writing(tmp_path: Path) -> None:
    script = _start(tmp_path / "a", "--steps", "6", "--pause-after", "3", "--pause", "3")
    try:
        trial = create_trial(str(tmp_path / "a"), timeout=60)
        rule = StalledTrainingRule(trial, threshold=1)
        assert _watch(rule, script, seconds=30)
        assert "the training looks stalled" in evidence_of(rule)[0].message
    finally:
        script.wait(timeout=60)
    after = StalledTrainingRule(create_trial(str(tmp_path / "a")), threshold=1)
    assert fired_steps(after) == [3]
    assert evidence_of(after)[0].value > 1
    assert after.check_progress() is False  # the job has ended


def test_stalled_training_rule_quiet_while_a_script_keeps_writing(tmp_path: Path) -> None:
    script = _start(tmp_path / "a", "--steps", "30", "--interval", "0.05")
    try:
        trial = create_trial(str(tmp_path / "a"), timeout=60)
        rule = StalledTrainingRule(trial, threshold=2)
        assert _watch(rule, script, seconds=30) is False
    finally:
        script.wait(timeout=60)
    assert script.returncode == 0
    assert fired_steps(StalledTrainingRule(create_trial(str(tmp_path / "a")), threshold=2)) == []


def test_the_engine_runs_the_built_in_rules_on_a_frozen_model(tmp_path: Path) -> None:
    run = Run(steps=12, train=False, collections=EVERYTHING)
    train(tmp_path, mlp([8, 16, 2]), DATA, run)
    definitions = [
        RuleDefinition.for_builtin("UnchangedTensor", {"collection_names": "weights"}),
        RuleDefinition.for_builtin("weight_update_ratio"),
        RuleDefinition.for_builtin("LossNotDecreasing", {"num_steps": "5"}),
        RuleDefinition.for_builtin("VanishingGradient"),
        RuleDefinition.for_builtin("ExplodingTensor", {"collection_names": "gradients,losses"}),
    ]
    verdicts = {v.name: v for v in RuleRunner(definitions, str(tmp_path)).run()}
    assert {name: v.status for name, v in verdicts.items()} == {
        "UnchangedTensor": "IssuesFound",
        "WeightUpdateRatio": "IssuesFound",
        "LossNotDecreasing": "IssuesFound",
        "VanishingGradient": "NoIssuesFound",
        "ExplodingTensor": "NoIssuesFound",
    }
    assert [issue.step for issue in verdicts["UnchangedTensor"].issues] == [2]
    # num_steps 5: TRAIN steps 5-9 against 0-4, the first comparison.
    assert [issue.step for issue in verdicts["LossNotDecreasing"].issues] == [9]
    assert "update/weight ratio 0 < small_threshold 1e-08" in verdicts["WeightUpdateRatio"].details
