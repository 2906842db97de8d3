"""The loss rules at their defaults on real trainings written in the public styles
(``loss_scripts``): a recurrent language model updated by hand, whose evaluation passes run
over the whole validation text, and a convergence loop that stops at a loss threshold. The
healthy ones end NoIssuesFound; the broken twins are caught at the step where they can first be,
named as the script counts it. Each training runs once, as its own process, for the module.

Rules run through the runner, as a job runs them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.rules.verdict import Verdict

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parent / "loss_scripts"


def run_script(out: Path, script: str, *arguments: str) -> str:
    """Run ``script`` as a user does, saving into ``out``; what it printed."""
    finished = subprocess.run(
        [sys.executable, str(SCRIPTS / script), str(out), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    return finished.stdout


def verdicts(out: Path, *rules: str) -> dict[str, Verdict]:
    """The verdicts of built-in ``rules`` at their defaults on the tensors at ``out``."""
    definitions = [RuleDefinition.for_builtin(rule, {}) for rule in rules]
    found = RuleRunner(definitions, str(out), no_data_timeout=5).run()
    return {verdict.name: verdict for verdict in found}


@pytest.fixture(scope="module")
def language_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lm") / "tensors"
    printed = run_script(out, "word_language_model.py")
    losses = [float(x) for x in re.findall(r"valid_loss (\S+)", printed)]
    assert len(losses) == 3 and losses[0] > losses[1] > losses[2], printed
    return out


@pytest.fixture(scope="module")
def frozen_language_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lm-frozen") / "tensors"
    run_script(out, "word_language_model.py", "--lr", "0")
    return out


def test_a_language_model_updated_by_hand_passes(language_model: Path) -> None:
    """Its evaluation passes (20 batches each, at fixed weights, longer than num_steps) are one
    value each, compared pass against pass: no batch of a pass against another."""
    found = verdicts(language_model, "LossNotDecreasing", "Overfit")
    for verdict in found.values():
        assert verdict.status == "NoIssuesFound", verdict.details
    loss = found["LossNotDecreasing"]
    # TRAIN steps 0-13 wait for 10 losses num_steps apart: the status says so, as a user counts.
    assert "14 training loss(es) up to TRAIN step 13 (step 33)" in loss.details
    assert "lower num_steps to 5" in loss.details


def test_a_language_model_whose_weights_never_move_is_caught(
    frozen_language_model: Path,
) -> None:
    """With lr 0 the validation text's loss is the same at every pass: the second pass, the
    first that can be compared, is the issue; it completes at the script's 25th iteration,
    TRAIN step 24, which is step 64 (two passes of 20 EVAL steps before it)."""
    verdict = verdicts(frozen_language_model, "LossNotDecreasing")["LossNotDecreasing"]
    assert verdict.status == "IssuesFound", verdict.details
    assert verdict.details.startswith(
        "LossNotDecreasing found an issue at TRAIN step 24 (step 64): CrossEntropyLoss_output_0: "
        "the validation loss went from "
    ), verdict.details
    issue = verdict.first_issue
    assert issue is not None and (issue.mode_step, issue.step) == (24, 64)
    (evidence,) = issue.evidence
    assert "(evaluation pass of 20 saved, EVAL steps 0-19 (steps 12-31))" in evidence.message
    assert "(evaluation pass of 20 saved, EVAL steps 20-39 (steps 44-63)), down 0%" in (
        evidence.message
    )


def _first_not_decreasing(losses: list[float]) -> int | None:
    """LossNotDecreasing at its defaults, written out for one series of training losses
    (numpy, from what the script printed): every 10 steps from step 14, the mean of the newest
    5 against the mean of the 5 ending 10 steps before; the first step that fires."""
    values = np.asarray(losses)
    for step in range(14, len(values), 10):
        now, before = values[step - 4 : step + 1], values[step - 14 : step - 9]
        change = 100 * (now.mean() - before.mean()) / before.mean()
        noise = 200 * np.sqrt(now.var(ddof=1) / 5 + before.var(ddof=1) / 5) / before.mean()
        if (change > 0 and change - noise > 5) or (change <= 0 and -change < 0.1):
            return step
    return None


@pytest.mark.parametrize(("features", "healthy"), [(4, True), (1, False)])
def test_a_convergence_loop(tmp_path: Path, features: int, healthy: bool) -> None:
    """PyTorch's regression example: the healthy loop stops once a batch's loss is below
    1e-3; its twin, given x alone for a polynomial, plateaus far above it and is caught where
    the losses it printed first show it, named by the script's count."""
    printed = run_script(tmp_path / "tensors", "regression.py", "--features", str(features))
    losses = [float(x) for x in re.findall(r"^batch \d+ loss (\S+)$", printed, re.M)]
    verdict = verdicts(tmp_path / "tensors", "LossNotDecreasing")["LossNotDecreasing"]
    if healthy:
        assert losses[-1] < 1e-3 < losses[0]
        assert verdict.status == "NoIssuesFound", verdict.details
        assert _first_not_decreasing(losses) is None
        return
    assert min(losses[-50:]) > 1.0, "the twin's loss must plateau far above the threshold"
    expected = _first_not_decreasing(losses)
    assert expected is not None
    assert verdict.status == "IssuesFound", verdict.details
    # The script's iterations are TRAIN steps 0, 1, ...; no evaluation: the two counts agree.
    assert verdict.details.startswith(
        f"LossNotDecreasing found an issue at TRAIN step {expected}: SmoothL1Loss_output_0: "
    ), verdict.details
