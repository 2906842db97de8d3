"""The report's debugging rules: each rule's verdict with what it checked, and where a NaN
started, on a real training whose first NaN appears in a known layer at a known step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.report import build_report
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner

pytestmark = pytest.mark.slow

NAN_STEP = 3


class Poisoned(nn.Module):
    """Multiplies by NaN from its NAN_STEP-th call on."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * float("nan") if self.calls > NAN_STEP else x


def test_the_report_shows_each_debugging_rule_and_where_the_nan_started(tmp_path: Path) -> None:
    job = tmp_path / "job"
    hook = smd.Hook(str(job / "debug-output"), save_config=smd.SaveConfig(save_interval=50))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), Poisoned(), nn.Linear(4, 1))
    loss_fn = nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(NAN_STEP + 2):
        loss_fn(model(torch.randn(8, 4)), torch.zeros(8, 1)).backward()
    hook.close()
    rules = [
        RuleDefinition.for_builtin("ExplodingTensor", {}),
        RuleDefinition.for_builtin("DeadRelu", {}),
    ]
    RuleRunner(rules, str(job / "debug-output"), output_dir=str(job / "rule-output")).run()

    (job / "profiler-output").mkdir()  # a job run with its profiler off
    report = build_report(str(job))
    content = json.loads(Path(report.json).read_text())["DebuggingRules"]
    origin = (
        f"step {NAN_STEP}: first NaN in the output of `1` (its inputs were finite); "
        "the loss became NaN at the same step"
    )
    assert content["FirstNonFinite"] == origin
    rows = {row["Rule"]: row for row in content["Rules"]}
    assert rows["ExplodingTensor"]["Status"] == "IssuesFound"
    assert rows["ExplodingTensor"]["StatusDetails"].startswith(
        f"ExplodingTensor found an issue at step {NAN_STEP}: {origin}"
    )
    assert rows["DeadRelu"]["Status"] == "Error"
    assert rows["DeadRelu"]["StepsSkipped"] == 2 and rows["DeadRelu"]["TensorsChecked"] == 0
    assert "names matching '.*relu_output'" in rows["DeadRelu"]["Unmatched"]
    page = Path(report.html).read_text()
    assert "first NaN in the output of `1`" in page and "tensors checked" in page


def test_the_report_lists_each_spike_the_training_skipped(tmp_path: Path) -> None:
    job = tmp_path / "job"
    rule = {
        "RuleConfigurationName": "LossSpike",
        "RuleName": "LossSpike",
        "RuleParameters": {"warmup_steps": "10", "action_json": json.dumps({"name": "SkipStep"})},
    }
    hook = smd.Hook(str(job / "debug-output"), training_rules=[rule], follow_training=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    hook.register_module(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(30):
        x = torch.randn(16, 4)
        y = x.sum(dim=1, keepdim=True) * (1000 if step == 20 else 1)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    hook.close()
    rules = [RuleDefinition.for_builtin("LossSpike", {})]
    RuleRunner(rules, str(job / "debug-output"), output_dir=str(job / "rule-output")).run()

    (job / "profiler-output").mkdir()
    report = build_report(str(job))
    content = json.loads(Path(report.json).read_text())["DebuggingRules"]
    [row] = content["Rules"]
    assert (row["Rule"], row["Status"]) == ("LossSpike", "IssuesFound")
    [spike] = content["Spikes"]
    assert (spike["Rule"], spike["Step"], spike["Action"]) == ("LossSpike", 20, "skip")
    page = Path(report.html).read_text()
    assert "TRAIN step 20" in page and "the update was skipped" in page
