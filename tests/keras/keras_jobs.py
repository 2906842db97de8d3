"""Run a Keras training under ``trainprobe run``, in a process of its own with ``KERAS_BACKEND``
set, and read what it saved and what it recorded of itself (its truth)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.rule_output import read_evaluations
from trainprobe.trials import create_trial

__all__ = ["BACKENDS", "RATE", "KerasJob", "batch_losses", "run_job"]

HERE = Path(__file__).resolve().parent
TRAININGS = HERE / "trainings"
BACKENDS = ("tensorflow", "jax", "torch")
RATE = 0.05
BATCHES = 8  # 128 samples in batches of 16


class KerasJob:
    """One ``trainprobe run`` of a Keras training: what it printed, its outputs, its truth."""

    def __init__(
        self,
        root: Path,
        backend: str,
        script: str,
        options: list[str],
        arguments: list[str],
        ending: str = "Completed",
    ) -> None:
        self.root = root
        self.backend = backend
        truth = root / "truth.json"
        arguments = [argument.replace("{root}", str(root)) for argument in arguments]
        command = [
            sys.executable,
            "-m",
            "trainprobe.cli.main",
            "run",
            str(TRAININGS / script),
            "--plain",
            "--output",
            str(root / "jobs"),
            "--name",
            "job",
            *options,
            "--",
            "--truth",
            str(truth),
            *arguments,
        ]
        environment = {
            **os.environ,
            "KERAS_BACKEND": backend,
            "TRAINPROBE_HOME": str(root / "home"),
            "TF_CPP_MIN_LOG_LEVEL": "2",
        }
        finished = subprocess.run(
            command, env=environment, cwd=root, capture_output=True, text=True, timeout=600
        )
        self.printed = finished.stdout
        self.status = finished.returncode
        assert f"Training job job: {ending}" in self.printed, (
            self.printed[-4000:] + finished.stderr[-4000:]
        )
        self.truth: dict[str, Any] = json.loads(truth.read_text()) if truth.exists() else {}
        self.out = root / "jobs" / "job"
        self.home = root / "home"

    @cached_property
    def trial(self) -> Any:
        return create_trial(str(self.out / "debug-output"))

    def values(self, name: str, mode: ModeKeys = ModeKeys.TRAIN) -> dict[int, np.ndarray]:
        tensor = self.trial.tensor(name)
        return {step: tensor.value(step, mode=mode) for step in tensor.steps(mode=mode)}

    def status_of(self, rule: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(
            (self.out / "rule-output" / rule / "status.json").read_text()
        )
        return found

    def rule_status(self, rule: str) -> str:
        return str(self.status_of(rule)["RuleEvaluationStatus"])

    def evidence(self, rule: str) -> list[str]:
        """The messages of the rule's evaluations, in order."""
        evaluations = read_evaluations(str(self.out / "rule-output" / rule))
        return [str(item["message"]) for line in evaluations for item in line["evidence"]]


def run_job(
    factory: pytest.TempPathFactory,
    backend: str,
    *arguments: str,
    script: str = "regression.py",
    options: tuple[str, ...] = (),
    rules: tuple[str, ...] = ("ExplodingTensor", "LossNotDecreasing"),
    ending: str = "Completed",
) -> KerasJob:
    """``trainprobe run`` of ``script`` on ``backend``, saving weights and gradients every
    step, with ``rules`` and more ``options``; the job must end ``ending``."""
    root = factory.mktemp(f"keras-{backend}")
    every_step = ["--save-interval", "1", "--collection", "weights", "--collection", "gradients"]
    named = [part for rule in rules for part in ("--rule", rule)]
    return KerasJob(root, backend, script, [*every_step, *named, *options], list(arguments), ending)


def batch_losses(logged: list[float]) -> list[float]:
    """Each batch's own loss, from the running means Keras logged (equal batches, 8 an epoch)."""
    own = []
    for index, mean in enumerate(logged):
        k = index % BATCHES
        own.append(mean * (k + 1) - (logged[index - 1] * k if k else 0.0))
    return own
