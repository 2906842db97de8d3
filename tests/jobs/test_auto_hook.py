"""The training entry, as the job runner starts it: the hook installed into a plain script.

Each test runs ``python -m trainprobe.jobs.processes.training_entry SCRIPT ARGS`` with a hook
configuration file, as a job's training runs, and reads what was saved with the trial API. The
expected losses are those the script itself printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from job_helpers import HERE, PLAIN_TRAINING

from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow


def run_entry(
    tmp_path: Path, script: Path, *arguments: str, collections: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "debug-output"
    config = tmp_path / "debughookconfig.json"
    document = {
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "1"},
        "CollectionConfigurations": [{"CollectionName": name} for name in collections],
    }
    config.write_text(json.dumps(document))
    environment = {
        **os.environ,
        "TRAINPROBE_AUTO_HOOK": "1",
        "TRAINPROBE_HOOK_CONFIG": str(config),
    }
    finished = subprocess.run(
        [sys.executable, "-m", "trainprobe.jobs.processes.training_entry", str(script), *arguments],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return finished, out


def printed_losses(stdout: str) -> dict[int, float]:
    losses = {}
    for line in stdout.splitlines():
        if line.startswith("loss "):
            _, step, value = line.split()
            losses[int(step)] = float(value)
    return losses


def test_a_plain_script_saves_its_losses_from_step_0(tmp_path: Path) -> None:
    finished, out = run_entry(
        tmp_path, PLAIN_TRAINING, "--steps", "5", "--print-losses", collections=("weights",)
    )
    assert finished.returncode == 0, finished.stderr
    assert "arguments: ['--steps', '5', '--print-losses']" in finished.stdout
    expected = printed_losses(finished.stdout)
    trial = create_trial(str(out))
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.steps() == [0, 1, 2, 3, 4]
    saved = {step: float(loss.value(step)) for step in loss.steps()}
    assert saved == pytest.approx(expected, rel=1e-6)
    # The model was registered as a script's own hook would register it: its weights by name.
    assert "Sequential_0.weight" in trial.tensor_names(collection="weights")


def test_a_loss_computed_without_a_loss_module_is_saved_at_backward(tmp_path: Path) -> None:
    finished, out = run_entry(
        tmp_path, PLAIN_TRAINING, "--steps", "4", "--functional-loss", "--print-losses"
    )
    assert finished.returncode == 0, finished.stderr
    expected = printed_losses(finished.stdout)
    loss = create_trial(str(out)).tensor("loss_output_0")
    assert loss.steps() == [0, 1, 2, 3]
    saved = {step: float(np.asarray(loss.value(step))) for step in loss.steps()}
    assert saved == pytest.approx(expected, rel=1e-6)


def test_a_script_that_creates_its_own_hook_keeps_it(tmp_path: Path) -> None:
    own = tmp_path / "own-output"
    finished, configured = run_entry(tmp_path, HERE / "own_hook_training.py", str(own))
    assert finished.returncode == 0, finished.stderr
    trial = create_trial(str(own))
    assert trial.tensor("scalar/own_hook_step").steps() == [0, 1, 2, 3]
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == [0, 1, 2, 3]
    assert not configured.exists(), "a second hook wrote into the job's configured output"


def test_a_crash_shows_the_scripts_traceback_and_exits_with_status_1(tmp_path: Path) -> None:
    finished, _ = run_entry(tmp_path, PLAIN_TRAINING, "--steps", "5", "--crash-at", "2")
    assert finished.returncode == 1
    lines = finished.stderr.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert str(PLAIN_TRAINING) in lines[1]
    assert lines[-1] == "ValueError: the training data ran out at step 2"
    assert "training_entry" not in finished.stderr
