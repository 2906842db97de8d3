"""The loss rules of a job under ``trainprobe run``, on a nanoGPT-style training with no line of
trainprobe in it (``tests/rules/loss_scripts/nanogpt_style.py``): gradient accumulation over
micro-batches, and every 10 iterations ``estimate_loss()``, an evaluation pass of 8 batches.

Before, LossNotDecreasing compared batches inside such passes and stopped healthy trainings;
now the healthy one ends NoIssuesFound, and its broken twin (a learning rate far too high) is
caught when the first pass that can be compared completes, named as the script counts it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "rules" / "loss_scripts" / "nanogpt_style.py"


def run_job(tmp_path: Path, name: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``trainprobe run`` of the script with LossNotDecreasing and Overfit, losses saved every
    step, as a user runs it."""
    command = [sys.executable, "-m", "trainprobe.cli.main", "run"]
    command += ["--rule", "LossNotDecreasing", "--rule", "Overfit"]
    command += ["--collection", "losses:save_interval=1", "--no-profiler", "--plain"]
    command += ["--output", str(tmp_path / "out"), "--name", name, str(SCRIPT), "--", *arguments]
    return subprocess.run(
        command,
        env={**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
    )


def status(tmp_path: Path, job: str, rule: str) -> dict[str, object]:
    found: dict[str, object] = json.loads(
        (tmp_path / "out" / job / "rule-output" / rule / "status.json").read_text()
    )
    return found


def test_a_healthy_nanogpt_style_training_passes(tmp_path: Path) -> None:
    finished = run_job(tmp_path, "nanogpt")
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    printed = re.findall(r"^step (\d+): train loss (\S+), val loss (\S+)$", finished.stdout, re.M)
    assert len(printed) == 5 and float(printed[-1][2]) < float(printed[0][2]) / 2
    for rule in ("LossNotDecreasing", "Overfit"):
        assert f"  {rule}: NoIssuesFound" in finished.stdout, finished.stdout[-3000:]
    details = str(status(tmp_path, "nanogpt", "LossNotDecreasing")["StatusDetails"])
    assert details.startswith("LossNotDecreasing found no issue: "), details
    # Progress names the steps as the script counts them (every step is saved).
    progress = re.findall(r"^\[trainprobe\] (.*step \d+.*)$", finished.stdout, re.M)
    assert progress, finished.stdout[-3000:]
    assert all(re.fullmatch(r"(TRAIN|EVAL) step \d+( \(step \d+\))?", line) for line in progress)


def test_a_learning_rate_far_too_high_is_caught_at_the_third_evaluation(tmp_path: Path) -> None:
    """The loss blows up. The passes at iterations 0 and 10 lie 8 EVAL steps apart, fewer than
    num_steps; the pass at iteration 20 is compared with the first, and completes when the
    script's iteration 20 starts: TRAIN step 20, the job's step 44 (three passes of 8 before)."""
    finished = run_job(tmp_path, "diverging", "--learning_rate", "5")
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    said = status(tmp_path, "diverging", "LossNotDecreasing")
    assert said["RuleEvaluationStatus"] == "IssuesFound"
    details = str(said["StatusDetails"])
    assert details.startswith(
        "LossNotDecreasing found an issue at TRAIN step 20 (step 44): loss_output_0: the "
        "validation loss went from "
    ), details
    assert "(evaluation pass of 8 saved, EVAL steps 0-7) to " in details
    assert "(evaluation pass of 8 saved, EVAL steps 16-23 (steps 36-43)), up " in details
    assert "[trainprobe] rule LossNotDecreasing: IssuesFound: " in finished.stdout
