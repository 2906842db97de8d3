"""XGBoost scripts with no line of trainprobe, run as a job's training runs: the hook comes in.

Each test runs ``python -m trainprobe.jobs.processes.training_entry
tests/capture/xgboost_training.py`` with a hook configuration file, as the job runner does, and
reads the output with the trial API; the expected metrics are those the script printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

TRAINING = Path(__file__).resolve().parent.parent / "capture" / "xgboost_training.py"
COLLECTIONS = ("metrics", "hyperparameters", "predictions", "labels", "trees")


def run_entry(
    tmp_path: Path, *arguments: str, hyperparameters: dict[str, object] | None = None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "debug-output"
    config = tmp_path / "debughookconfig.json"
    config.write_text(
        json.dumps(
            {
                "LocalPath": str(out),
                "HookParameters": {"save_interval": "1"},
                "CollectionConfigurations": [{"CollectionName": name} for name in COLLECTIONS],
            }
        )
    )
    environment = {
        **os.environ,
        "TRAINPROBE_AUTO_HOOK": "1",
        "TRAINPROBE_HOOK_CONFIG": str(config),
        "SM_HPS": json.dumps(hyperparameters or {}),
    }
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainprobe.jobs.processes.training_entry",
            str(TRAINING),
            *arguments,
        ],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr
    return finished, out


def printed_metrics(stdout: str) -> dict[str, dict[int, float]]:
    metrics: dict[str, dict[int, float]] = {}
    for line in stdout.splitlines():
        if line.startswith("metric "):
            _, name, round_number, value = line.split()
            metrics.setdefault(name, {})[int(round_number)] = float(value)
    return metrics


@pytest.mark.parametrize(
    ("task", "api", "validation"),
    [("binary", "train", "validation"), ("multiclass", "sklearn", "validation_1")],
)
def test_a_plain_script_is_hooked(tmp_path: Path, task: str, api: str, validation: str) -> None:
    finished, out = run_entry(tmp_path, "--task", task, "--api", api, "--rounds", "3")
    printed = printed_metrics(finished.stdout)
    trial = create_trial(str(out))
    assert trial.steps() == [0, 1, 2]
    assert set(trial.tensor_names(collection="metrics")) == set(printed)
    for name, by_round in printed.items():
        saved = {step: float(trial.tensor(name).value(step)[0]) for step in trial.steps()}
        assert saved == pytest.approx(by_round, rel=1e-6)
    # Predictions are the model's on the last evaluation set that is not the training data.
    labels = trial.tensor("labels").value(2)
    predictions = trial.tensor("predictions").value(2)
    assert len(predictions) == len(labels)
    last_loss = f"{validation}-{'logloss' if task == 'binary' else 'mlogloss'}"
    if task == "binary":
        probability = np.clip(predictions, 1e-7, 1 - 1e-7)
        loss = -np.mean(labels * np.log(probability) + (1 - labels) * np.log(1 - probability))
    else:
        loss = -np.mean(np.log(predictions[np.arange(len(labels)), labels.astype(int)]))
    assert loss == pytest.approx(printed[last_loss][2], rel=1e-4)
    # The job gave no hyperparameters: the training's params are saved, those it set only.
    assert int(trial.tensor("hyperparameters/max_depth").value(0)[0]) == 3
    hyperparameters = trial.tensor_names(collection="hyperparameters")
    assert "None" not in {str(trial.tensor(n).value(0)[0]) for n in hyperparameters}
    assert trial.tensor("trees/Node").steps() == [0, 1, 2]
    assert (out / "training_job_end.ts").exists()


def test_the_jobs_hyperparameters_are_saved(tmp_path: Path) -> None:
    _, out = run_entry(
        tmp_path, "--task", "regression", "--rounds", "2", hyperparameters={"num_round": 2}
    )
    trial = create_trial(str(out))
    assert trial.tensor_names(collection="hyperparameters") == ["hyperparameters/num_round"]
    assert int(trial.tensor("hyperparameters/num_round").value(0)[0]) == 2
    assert "train-rmse" in trial.tensor_names()


def test_a_script_with_its_own_hook_keeps_it(tmp_path: Path) -> None:
    own = tmp_path / "own"
    _, out = run_entry(tmp_path, "--rounds", "2", "--hook", str(own))
    assert create_trial(str(own)).steps() == [0, 1]
    assert not out.exists()
