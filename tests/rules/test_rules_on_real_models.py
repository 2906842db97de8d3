"""VanishingGradient and LossNotDecreasing at their default parameters on idiomatic models
(``real_models``): a healthy training raises no issue, and the status names what the rule set
aside; the broken twin (a learning rate far too high: the loss turns NaN) is caught and named;
a genuinely vanishing gradient (a deep sigmoid network) still fires.

Rules run through the runner, as a job runs them, and through ``trainprobe rules run``.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from builtin_training import Run, classes, train
from real_models import BERT, RESNET, Task
from real_models import train as train_saving
from torch import nn

from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.rules.verdict import Verdict
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

STEPS = 100
"""Ten saved losses (every 10 steps): LossNotDecreasing averages 5 on each side."""


def verdicts(out: Path) -> dict[str, Verdict]:
    """VanishingGradient's and LossNotDecreasing's verdicts on the job saved at ``out``."""
    definitions = [
        RuleDefinition.for_builtin("VanishingGradient", {}),
        RuleDefinition.for_builtin("LossNotDecreasing", {}),
    ]
    found = RuleRunner(definitions, str(out), no_data_timeout=5).run()
    return {verdict.name: verdict for verdict in found}


@pytest.fixture(scope="module")
def healthy_resnet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_saving(tmp_path_factory.mktemp("resnet"), RESNET, steps=STEPS)


def test_a_resnet_with_zero_initialised_blocks_trains_without_issue(healthy_resnet: Path) -> None:
    found = verdicts(healthy_resnet)
    vanishing, loss = found["VanishingGradient"], found["LossNotDecreasing"]
    assert vanishing.status == "NoIssuesFound", vanishing.details
    assert loss.status == "NoIssuesFound", loss.details
    assert vanishing.steps_evaluated == STEPS // 10
    # At step 0 no gradient reaches the layers inside a block: said, not judged.
    assert "0 step(s) skipped. Set aside while" in vanishing.details
    said = vanishing.details[vanishing.details.index("Set aside") :]
    assert said.startswith(
        "Set aside while their gradient was exactly 0 and had never been non-zero, and other "
        "gradients were not (a zero-initialised branch before its first update"
    )
    assert (
        ", at TRAIN step 0: gradient/ResNet_blocks.0.bn1.bias, gradient/ResNet_blocks.0.bn1.weight"
        in (said)
    )
    assert "(8 in all)" in said


def test_a_small_bert_trains_without_issue(tmp_path: Path) -> None:
    out = train_saving(tmp_path, BERT, steps=100)
    found = verdicts(out)
    vanishing, loss = found["VanishingGradient"], found["LossNotDecreasing"]
    assert vanishing.status == "NoIssuesFound", vanishing.details
    assert loss.status == "NoIssuesFound", loss.details
    # One batch's loss is noisy (a label in five is wrong): one saved loss is over 5 % above
    # the one 10 steps before, which fired when single mini-batch losses were compared.
    losses = create_trial(str(out)).tensor("CrossEntropyLoss_output_0")
    saved = [float(losses.value(step)) for step in losses.steps()]
    assert any(after > 1.05 * before for before, after in itertools.pairwise(saved))
    said = vanishing.details[vanishing.details.index("Set aside") :]
    assert said.startswith("Set aside biases whose gradient was below threshold while their")
    assert "at 10 steps, from TRAIN step 0 to TRAIN step 90: " in said
    assert "encoder.layer.0.attention.self.key.bias" in said
    assert "encoder.layer.1.attention.self.key.bias" in said


@pytest.mark.parametrize(("task", "lr"), [(RESNET, 1e10), (BERT, 1e4)], ids=["resnet", "bert"])
def test_a_learning_rate_far_too_high_is_caught(tmp_path: Path, task: Task, lr: float) -> None:
    out = train_saving(tmp_path, task, lr=lr, steps=30)
    found = verdicts(out)
    loss = found["LossNotDecreasing"]
    assert loss.status == "IssuesFound", loss.details
    # The hook also saves the step where the loss first turns NaN.
    losses = create_trial(str(out)).tensor("CrossEntropyLoss_output_0")
    first = next(step for step in losses.steps() if math.isnan(float(losses.value(step))))
    assert loss.first_issue is not None and loss.first_issue.step == first
    assert f"CrossEntropyLoss_output_0: the loss is nan at TRAIN step {first}" in loss.details
    # NaN gradients are neither vanishing nor not: VanishingGradient says it set them aside.
    assert "Set aside gradients that were not finite" in found["VanishingGradient"].details


def _deep_sigmoid(depth: int) -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(8, 8), nn.Sigmoid()]
    return nn.Sequential(*layers, nn.Linear(8, 2))


def test_a_deep_sigmoid_network_s_gradient_still_vanishes(tmp_path: Path) -> None:
    run = Run(steps=3, collections=("gradients", "losses"))
    deep = train(tmp_path / "deep", _deep_sigmoid(12), classes(64, 8, seed=0), run)
    definition = RuleDefinition.for_builtin("VanishingGradient", {})
    verdict = RuleRunner(definition, deep.path, no_data_timeout=5).run()[0]
    assert verdict.status == "IssuesFound"
    assert verdict.first_issue is not None and verdict.first_issue.step == 0
    vanished = {item.tensor for item in verdict.first_issue.evidence}
    # The first layer's weight and bias vanish together: nothing to set aside.
    assert {"gradient/Sequential_0.weight", "gradient/Sequential_0.bias"} <= vanished
    assert "Set aside" not in verdict.details
    shallow = train(tmp_path / "shallow", _deep_sigmoid(2), classes(64, 8, seed=0), run)
    verdict = RuleRunner(definition, shallow.path, no_data_timeout=5).run()[0]
    assert verdict.status == "NoIssuesFound", verdict.details


def rules_run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", "rules", "run", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_rules_run_on_the_resnet_prints_what_it_set_aside(healthy_resnet: Path) -> None:
    result = rules_run("VanishingGradient", str(healthy_resnet))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "VanishingGradient: NoIssuesFound" in result.stdout
    assert "Set aside while their gradient was exactly 0" in result.stdout
    assert "gradient/ResNet_blocks.0.conv1.weight" in result.stdout
    result = rules_run("LossNotDecreasing", str(healthy_resnet))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "LossNotDecreasing: NoIssuesFound" in result.stdout
    # The hook's record of every TRAIN step is judged, not the 10 saved losses: steps 0 and 10
    # wait for 5 losses at least num_steps before the newest 5; every saved step after compares.
    assert "The training losses judged are trainprobe/loss" in result.stdout
    assert "Steps evaluated: 9, skipped: 2" in result.stdout
