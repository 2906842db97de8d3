"""``trainprobe rules run`` with the loss rules on trainings that save through their own hook,
every step, evaluating a batch every 5 iterations (``tests/rules/loss_scripts/clusters.py``):
the verdicts and their reasons read back from the rules' ``status.json``, as a user reads them.

The healthy training is issue 39's: a 300-step MLP on well-separated clusters whose validation
loss falls with its training loss, where Overfit at SageMaker's defaults once said True.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

CLUSTERS = Path(__file__).resolve().parents[1] / "rules" / "loss_scripts" / "clusters.py"


def train(out: Path, *arguments: str) -> list[tuple[int, float, float]]:
    """Run the clusters training into ``out``; its (iteration, training, validation) losses."""
    finished = subprocess.run(
        [sys.executable, str(CLUSTERS), str(out), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    found = re.findall(r"^eval (\d+) (\S+) (\S+)$", finished.stdout, re.M)
    return [(int(i), float(t), float(v)) for i, t, v in found]


def rules_run(rule: str, path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", "rules", "run", rule, *options, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def status_of(path: Path, name: str) -> dict[str, Any]:
    """The status a rule run wrote beside ``path`` (its default output)."""
    written = path.parent / "rule-output" / name / "status.json"
    found: dict[str, Any] = json.loads(written.read_text())
    return found


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("healthy") / "debug-output"
    evaluations = train(out)
    assert len(evaluations) == 60
    # The validation loss falls with the training loss.
    assert evaluations[-1][2] < evaluations[0][2] / 10
    return out


def test_overfit_passes_a_healthy_training_evaluated_every_5_steps(healthy: Path) -> None:
    finished = rules_run("Overfit", healthy, "--quiet")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "Overfit: NoIssuesFound" in finished.stdout
    status = status_of(healthy, "Overfit")
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    assert status["StatusDetails"].startswith("Overfit found no issue: ")


def test_overfit_catches_the_overfitting_twin_at_its_first_evaluation(tmp_path: Path) -> None:
    """A wide network on 32 samples of overlapping clusters: by the fifth evaluation batch,
    the first time 5 can be averaged, its validation loss is far above its training loss."""
    out = tmp_path / "debug-output"
    evaluations = train(out, "--overfit")
    finished = rules_run("Overfit", out, "--quiet")
    assert finished.returncode == 1, finished.stdout + finished.stderr
    status = status_of(out, "Overfit")
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    # The fifth pass (EVAL step 4, after iteration 25) completes when TRAIN step 25 (the
    # script's 26th iteration) starts, the job's step 30 (five evaluation steps before it).
    details = status["StatusDetails"]
    assert details.startswith("Overfit found an issue at TRAIN step 25 (step 30): "), details
    assert "at the evaluation pass of EVAL step 4 (step 29)" in details
    # What the script printed agrees: its validation losses are far above its training losses.
    first = evaluations[:5]
    validation = sum(v for _, _, v in first) / 5
    training = sum(t for _, t, _ in first) / 5
    assert validation > 1.1 * training


def test_the_loss_rule_waiting_for_losses_says_why_and_its_advice_works(tmp_path: Path) -> None:
    """Ten iterations: ten training losses, two single-batch evaluation passes. The rule says,
    for each kind apart, what it waits for; lowering num_steps as it advises lets it judge."""
    out = tmp_path / "debug-output"
    train(out, "--iterations", "10")
    finished = rules_run("LossNotDecreasing", out, "--quiet")
    assert finished.returncode == 2, finished.stdout + finished.stderr
    details = status_of(out, "LossNotDecreasing")["StatusDetails"]
    assert details.startswith(
        "LossNotDecreasing judged no step (waiting for losses to compare: "
        "CrossEntropyLoss_output_0: 10 training loss(es) up to TRAIN step 9 (step 10): the "
        "newest 5 losses are compared with the 5 losses before them, the newest of those at "
        "least num_steps 10 TRAIN steps before the newest; so far that gap is at most 5 TRAIN "
        "steps: run longer, or lower num_steps to 5; CrossEntropyLoss_output_0: 2 EVAL pass(es) "
        "holding 2 saved loss(es) in all up to EVAL step 1 (step 11), 10 needed (each side of a "
        "comparison averages 5): run longer, or save the losses more often)."
    ), details
    # A lower num_steps than it said does not do; the one it said does.
    lower = rules_run("LossNotDecreasing", out, "--quiet", "--replace", "--param", "num_steps=6")
    assert lower.returncode == 2, lower.stdout
    assert "so far that gap is at most 5 TRAIN steps" in lower.stdout
    said = rules_run("LossNotDecreasing", out, "--quiet", "--replace", "--param", "num_steps=5")
    assert said.returncode == 0, said.stdout + said.stderr
    status = status_of(out, "LossNotDecreasing")
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    # It compared the training losses; the evaluation passes it could not, and says so.
    assert (
        "The evaluation passes of CrossEntropyLoss_output_0 were never compared: "
        in (status["StatusDetails"])
    )
