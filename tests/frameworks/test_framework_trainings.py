"""The trainings users write with Hugging Face's Trainer, Lightning, accelerate, a timm-style
ResNet and a BERT-style model, run unchanged under trainprobe's automatic hook.

Each script here is written as its framework's users write it (no trainprobe in it) and prints
what the framework itself reports: its optimizer steps, its evaluation batches, its losses. Each
test runs it as a job's training runs (``python -m trainprobe.jobs.processes.training_entry``, with
a hook configuration that saves every step) and checks that trainprobe read the training as the
script did: TRAIN steps are the optimizer steps, EVAL steps the evaluation batches, and the saved
loss of each step is the one the script printed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trainprobe.storage.modes import ModeKeys
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


def needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"{module} is not installed"
    )


class Run:
    """A script's run under the automatic hook: what it printed, and the trial of its tensors."""

    def __init__(self, tmp_path: Path, script: str, *arguments: str) -> None:
        out = tmp_path / "debug-output"
        config = tmp_path / "debughookconfig.json"
        config.write_text(
            json.dumps(
                {
                    "LocalPath": str(out),
                    "HookParameters": {"save_interval": "1"},
                    # The biases mark every step saved, those without a loss too.
                    "CollectionConfigurations": [
                        {"CollectionName": "losses"},
                        {"CollectionName": "biases"},
                    ],
                }
            )
        )
        environment = {
            **os.environ,
            "TRAINPROBE_AUTO_HOOK": "1",
            "TRAINPROBE_HOOK_CONFIG": str(config),
            "TOKENIZERS_PARALLELISM": "false",
        }
        finished = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainprobe.jobs.processes.training_entry",
                str(HERE / script),
                *arguments,
            ],
            env=environment,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert finished.returncode == 0, finished.stderr[-3000:]
        self.lines = [line.split() for line in finished.stdout.splitlines()]
        self.trial = create_trial(str(out))

    def printed(self, key: str) -> list[float]:
        """The values printed after ``key`` (the last field of each such line)."""
        return [float(line[-1]) for line in self.lines if line and line[0] == key]

    def printed_count(self, key: str) -> int:
        return int(self.printed(key)[-1])

    def saved_losses(self, mode: ModeKeys) -> list[float]:
        (name,) = self.trial.tensor_names(collection="losses")
        loss = self.trial.tensor(name)
        return [
            float(np.asarray(loss.value(step, mode=mode))) for step in self.trial.steps(mode=mode)
        ]


@needs("transformers")
def test_hugging_face_trainer_steps_are_its_optimizer_steps_with_accumulation(
    tmp_path: Path,
) -> None:
    run = Run(tmp_path, "hf_trainer_gpt2.py", "--steps", "6", "--accumulation", "2")
    steps = run.printed_count("optimizer_steps")
    assert run.trial.steps(mode=ModeKeys.TRAIN) == list(range(steps))
    assert len(run.trial.steps(mode=ModeKeys.EVAL)) == run.printed_count("evaluations")
    # The Trainer logs each step's loss over its two micro-batches: trainprobe saved the same.
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(run.printed("train_loss"), rel=1e-5)
    # Its eval_loss is the mean of the evaluation batches' losses, each saved in EVAL.
    evaluations = run.saved_losses(ModeKeys.EVAL)
    per_evaluation = len(evaluations) // len(run.printed("eval_loss"))
    means = [
        float(np.mean(evaluations[start : start + per_evaluation]))
        for start in range(0, len(evaluations), per_evaluation)
    ]
    assert means == pytest.approx(run.printed("eval_loss"), rel=1e-5)


@needs("lightning")
def test_lightning_sanity_check_and_validation_are_eval_and_closures_one_step(
    tmp_path: Path,
) -> None:
    run = Run(tmp_path, "lightning_module.py", "--steps", "12", "--val-every", "5", "--predict")
    steps = run.printed_count("optimizer_steps")
    assert steps == 12
    assert run.trial.steps(mode=ModeKeys.TRAIN) == list(range(steps))
    # Sanity check (2 batches) and two validations (2 batches each): every one an EVAL step.
    assert len(run.trial.steps(mode=ModeKeys.EVAL)) == run.printed_count("validation_batches")
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(run.printed("train_loss"), rel=1e-6)
    assert run.saved_losses(ModeKeys.EVAL) == pytest.approx(run.printed("val_loss"), rel=1e-6)
    # trainer.predict(): each batch a PREDICT step.
    assert len(run.trial.steps(mode=ModeKeys.PREDICT)) == run.printed_count("prediction_batches")


@needs("accelerate")
def test_accelerate_accumulation_saves_the_unscaled_loss_of_each_optimizer_step(
    tmp_path: Path,
) -> None:
    run = Run(tmp_path, "accelerate_loop.py", "--steps", "10", "--accumulation", "4")
    assert run.trial.steps(mode=ModeKeys.TRAIN) == list(range(10))
    assert len(run.trial.steps(mode=ModeKeys.EVAL)) == run.printed_count("evaluation_batches")
    # The mean of each step's four micro-batch losses, not accelerate's loss / 4.
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(run.printed("train_loss"), rel=1e-5)
    assert run.saved_losses(ModeKeys.EVAL) == pytest.approx(run.printed("eval_loss"), rel=1e-6)


def test_a_resnet_under_bf16_autocast_is_read_step_by_step(tmp_path: Path) -> None:
    run = Run(tmp_path, "residual_bf16.py", "--steps", "12", "--eval-every", "6")
    assert run.trial.steps(mode=ModeKeys.TRAIN) == list(range(12))
    assert run.trial.steps(mode=ModeKeys.EVAL) == [0, 1]
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(run.printed("train_loss"), rel=1e-6)
    assert run.saved_losses(ModeKeys.EVAL) == pytest.approx(run.printed("eval_loss"), rel=1e-6)


@needs("transformers")
def test_a_loss_module_made_inside_forward_is_saved_every_step(tmp_path: Path) -> None:
    run = Run(tmp_path, "bert_loss_in_forward.py", "--steps", "12", "--eval-every", "6")
    assert run.trial.tensor_names(collection="losses") == ["CrossEntropyLoss_output_0"]
    assert run.trial.steps(mode=ModeKeys.TRAIN) == list(range(12))
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(run.printed("train_loss"), rel=1e-6)
    assert run.saved_losses(ModeKeys.EVAL) == pytest.approx(run.printed("eval_loss"), rel=1e-6)


def trainprobe_run(tmp_path: Path, script: str, *arguments: str) -> str:
    """``trainprobe run SCRIPT`` with the issue's rules, every 10 steps (the losses every step:
    LossNotDecreasing averages 5 on each side of a comparison); what it printed."""
    rules = ["--rule", "LossNotDecreasing", "--rule", "VanishingGradient"]
    rules += ["--rule", "ExplodingTensor", "--save-interval", "10"]
    rules += ["--collection", "losses:save_interval=1", "--", *arguments]
    finished = subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", "run", str(HERE / script), "--plain", *rules],
        env={**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Completed" in finished.stdout, finished.stdout[-3000:] + finished.stderr[-3000:]
    return finished.stdout


@pytest.mark.parametrize(
    "script",
    ["residual_bf16.py", pytest.param("bert_loss_in_forward.py", marks=needs("transformers"))],
)
def test_no_rule_fires_on_a_healthy_training_at_default_parameters(
    tmp_path: Path, script: str
) -> None:
    printed = trainprobe_run(tmp_path, script, "--steps", "40")
    for rule in ("LossNotDecreasing", "VanishingGradient", "ExplodingTensor"):
        assert f"{rule}: NoIssuesFound" in printed, printed


def test_a_nan_in_a_resnet_is_caught_and_named_at_the_training_step(tmp_path: Path) -> None:
    printed = trainprobe_run(tmp_path, "residual_bf16.py", "--steps", "30", "--nan-at", "15")
    assert "ExplodingTensor: IssuesFound" in printed
    assert "LossNotDecreasing: IssuesFound" in printed
    # Two evaluations came before: the training's own step 15 is the job's step 17.
    assert "TRAIN step 15 (step 17): first NaN in the output of `stem.0`" in printed
