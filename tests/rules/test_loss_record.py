"""LossNotDecreasing on a short job at SageMaker's save interval (500 steps): one training loss
saved, too few to compare, but the hook's record of every TRAIN step's loss
(``trainprobe/loss``) lets the rule judge, and its verdict says where the losses came from and
names the step as the training counts it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import trainprobe.pytorch as smd

pytestmark = pytest.mark.slow  # real trainings, a rule run in a subprocess

STEPS = 80
TRAINPROBE = [sys.executable, "-m", "trainprobe.cli.main"]


def train(out: Path, relabel_at: int | None) -> None:
    """A small classifier on one fixed batch, full-batch SGD: its loss falls at every step.
    From step ``relabel_at`` the labels are shuffled (the data changed under the model): the
    loss jumps up and stays up."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4))
    hook = smd.Hook(str(out), follow_training=True)
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, labels = torch.randn(64, 12), torch.randint(0, 4, (64,))
    for step in range(STEPS):
        if step == relabel_at:
            labels = (labels + 1) % 4
        optimizer.zero_grad()
        loss_fn(model(inputs), labels).backward()
        optimizer.step()
    hook.close()


def loss_not_decreasing(out: Path) -> dict[str, str]:
    finished = subprocess.run(
        [*TRAINPROBE, "rules", "run", "LossNotDecreasing", "--quiet", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode in (0, 1), finished.stdout + finished.stderr
    written = out.parent / "rule-output" / "LossNotDecreasing" / "status.json"
    status: dict[str, str] = json.loads(written.read_text())
    return status


def test_a_rise_after_the_only_saved_loss_is_found_in_the_record(tmp_path: Path) -> None:
    out = tmp_path / "debug-output"
    train(out, relabel_at=50)

    status = loss_not_decreasing(out)
    assert status["RuleEvaluationStatus"] == "IssuesFound", status["StatusDetails"]
    details = status["StatusDetails"]
    found = re.search(r"found an issue at TRAIN step (\d+):", details)
    assert found is not None, details
    step = int(found.group(1))
    assert step >= 50  # the rise, not the only saved step
    assert "trainprobe/loss: the loss went from " in details
    assert "mean of 5 recorded, TRAIN steps" in details
    assert "The training losses judged are trainprobe/loss" in details
    assert "matched nothing" not in details


def test_a_falling_loss_passes_where_it_saved_one(tmp_path: Path) -> None:
    out = tmp_path / "debug-output"
    train(out, relabel_at=None)

    status = loss_not_decreasing(out)
    assert status["RuleEvaluationStatus"] == "NoIssuesFound", status["StatusDetails"]
    assert "The training losses judged are trainprobe/loss" in status["StatusDetails"]
