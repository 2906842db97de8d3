"""Trainings written the way public examples write them, run unchanged under ``trainprobe run``,
against what each computed itself.

Each script here (no trainprobe in any) keeps its own truth in a side file (``--truth``): its
losses, its evaluation batches, and the gradients it updated with. Each test runs it as a user
does (``trainprobe run SCRIPT --save-interval 1 --collection gradients -- ...``) and compares
the trial's saved values with that truth: every step saved, in its mode, with the loss the
script saw and the gradients as its update found them, and nothing in the training's output
that the training did not print itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from trainprobe.storage.flight_captures import list_captures, write_profile_request
from trainprobe.storage.modes import ModeKeys
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
JOB = "public"

# What PyTorch's profiler library and allocator print when left to themselves.
PROFILER_NOISE = ("USDT:", "profiler_start", "profiler_stop", "CPUAllocator")


class ScriptRun:
    """``trainprobe run SCRIPT`` as a user runs it, with the script's truth and the trial."""

    def __init__(
        self,
        tmp_path: Path,
        script: str,
        *arguments: str,
        options: tuple[str, ...] = (),
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.truth_file = tmp_path / "truth.jsonl"
        self.job = tmp_path / "out" / JOB
        command = [
            sys.executable,
            "-m",
            "trainprobe.cli.main",
            "run",
            str(HERE / script),
            *("--output", str(tmp_path / "out"), "--name", JOB),
            *("--save-interval", "1", "--collection", "gradients", *options),
            "--",
            *("--truth", str(self.truth_file), *arguments),
        ]
        environment = {**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")}
        process = subprocess.Popen(
            command,
            env=environment,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        self.lines: list[str] = []
        for line in process.stdout:
            self.lines.append(line.rstrip("\n"))
            if on_line is not None:
                on_line(line)
        assert process.wait(timeout=600) == 0, "\n".join(self.lines[-60:])
        self.truth = [json.loads(line) for line in self.truth_file.read_text().splitlines()]
        self.trial = create_trial(str(self.job / "debug-output"))

    def told(self, kind: str) -> list[dict[str, Any]]:
        """The script's own records of ``kind`` (``train``, ``eval``, ...), in order."""
        return [record for record in self.truth if record["kind"] == kind]

    def saved_losses(self, mode: ModeKeys) -> list[float]:
        (name,) = self.trial.tensor_names(collection="losses")
        loss = self.trial.tensor(name)
        return [float(np.asarray(loss.value(step, mode=mode))) for step in loss.steps(mode=mode)]

    def saved_gradients(self, name: str) -> list[np.ndarray]:
        """The saved gradient of parameter ``name`` at each TRAIN step."""
        tensor = self.trial.tensor(f"gradient/{name}")
        train = ModeKeys.TRAIN
        return [np.asarray(tensor.value(step, mode=train)) for step in tensor.steps(mode=train)]

    def assert_gradients_as_told(self, kind: str, model: str) -> None:
        """Every TRAIN step's saved gradients are those the script recorded (``kind``)."""
        told = self.told(kind)
        assert self.trial.steps(mode=ModeKeys.TRAIN) == list(range(len(told)))
        for parameter in told[0]["grads"]:
            saved = self.saved_gradients(f"{model}_{parameter}")
            expected = [np.asarray(record["grads"][parameter]) for record in told]
            assert len(saved) == len(expected), parameter
            for step, (value, truth) in enumerate(zip(saved, expected, strict=True)):
                np.testing.assert_allclose(value, truth, rtol=1e-6, atol=1e-9, err_msg=f"{step}")

    def profiler_noise(self) -> list[str]:
        return [line for line in self.lines if any(word in line for word in PROFILER_NOISE)]


def test_a_language_model_updated_by_hand_and_saved_whole_every_epoch(tmp_path: Path) -> None:
    # word_language_model's way: SGD by hand after clipping, torch.save(model, f) whenever
    # validation improves, the best model loaded back at the end. With the default profiling.
    saved_model = tmp_path / "model.pt"
    run = ScriptRun(tmp_path, "word_language_model.py", "--save", str(saved_model))
    assert any(line.startswith("| End of training | test loss") for line in run.lines)
    # The TRAIN steps are its batches, with their losses and the gradients its backward left
    # (before the clipping and the update that follow it by hand).
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(
        [record["loss"] for record in run.told("train")], rel=1e-6
    )
    run.assert_gradients_as_told("train", "RNNModel")
    # The evaluation batches of the model trainprobe follows (the two epochs'; the model
    # loaded back at the end is another object, not followed).
    evaluations = [record["loss"] for record in run.told("eval")]
    saved = run.saved_losses(ModeKeys.EVAL)
    assert len(saved) == len(evaluations) * 2 // 3
    assert saved == pytest.approx(evaluations[: len(saved)], rel=1e-6)
    # What it saved loads where trainprobe is not installed: a Python that has torch and the
    # model's module, not trainprobe.
    loaded = load_without_trainprobe(saved_model)
    assert loaded == "RNNModel 0 0"


def load_without_trainprobe(path: Path) -> str:
    """Load a model saved whole in a Python whose path has torch but not trainprobe: the
    model's class, and its hooks (PyTorch's count of forward pre-hooks and hooks)."""
    site = str(Path(torch.__file__).resolve().parent.parent)
    program = (
        "import sys\n"
        f"sys.path[:0] = [{site!r}, {str(HERE)!r}]\n"
        "import importlib.util, torch\n"
        "assert importlib.util.find_spec('trainprobe') is None, 'trainprobe is importable'\n"
        f"model = torch.load({str(path)!r}, weights_only=False)\n"
        "hooks = [len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules()]\n"
        "print(type(model).__name__, sum(hooks), len(model._forward_hooks_with_kwargs))\n"
    )
    finished = subprocess.run(
        [sys.executable, "-I", "-S", "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=path.parent,
    )
    assert finished.returncode == 0, finished.stderr
    return finished.stdout.strip()


def test_a_convergence_loop_updated_by_hand_until_its_loss_is_small(tmp_path: Path) -> None:
    # The regression example's way: no optimizer, F.smooth_l1_loss, a loop that stops when the
    # loss falls under a threshold.
    run = ScriptRun(tmp_path, "convergence_loop.py", options=("--no-profiler",))
    told = run.told("train")
    assert any(line.startswith("Loss: ") for line in run.lines)
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(
        [record["loss"] for record in told], rel=1e-6
    )
    run.assert_gradients_as_told("train", "Linear")
    assert run.trial.steps(mode=ModeKeys.EVAL) == []


def test_an_lbfgs_training_saves_the_loss_its_step_returned(tmp_path: Path) -> None:
    # time_sequence_prediction's way: LBFGS evaluates the closure several times a step, at
    # other weights each time; the step's loss is the one optimizer.step(closure) returned.
    run = ScriptRun(tmp_path, "lbfgs_closure.py", options=("--no-profiler",))
    evaluations_a_step = sum(line.startswith("loss:") for line in run.lines) / len(
        run.told("train")
    )
    assert evaluations_a_step > 2  # the closure ran again within each step
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(
        [record["loss"] for record in run.told("train")], rel=1e-9
    )
    run.assert_gradients_as_told("train", "Sequence")
    assert run.saved_losses(ModeKeys.EVAL) == pytest.approx(
        [record["loss"] for record in run.told("eval")], rel=1e-9
    )


def test_nanogpt_style_accumulation_and_estimate_loss_with_a_capture_adds_no_output(
    tmp_path: Path,
) -> None:
    # nanoGPT's way: four micro-batches an update, each loss divided by four, a GradScaler,
    # clipping, and estimate_loss() passes in eval mode. A capture of the flight recorder is
    # asked for while it trains (as `trainprobe profile` asks).
    profiler_output = tmp_path / "out" / JOB / "profiler-output"
    asked = threading.Event()

    def ask_for_a_capture(line: str) -> None:
        if line.startswith("iter 2:") and not asked.is_set():
            asked.set()
            write_profile_request(str(profiler_output), 2)

    # Iterations enough after the request for it to be seen on a loaded machine, where the
    # training's lines reach this test late.
    run = ScriptRun(
        tmp_path, "nanogpt_accumulation.py", "--max-iters", "200", on_line=ask_for_a_capture
    )
    # The capture was made, and the profiler library said nothing in the training's output.
    captures = [c for c in list_captures(str(profiler_output)) if c.trigger == "request"]
    assert len(captures) == 1 and captures[0].trace is not None
    assert run.profiler_noise() == []
    # A TRAIN step is an update: its loss the mean of its micro-batches' (each before its
    # division), its gradients those the optimizer stepped with (unscaled, clipped).
    micro = [record["loss"] for record in run.told("micro")]
    means = [float(np.mean(micro[start : start + 4])) for start in range(0, len(micro), 4)]
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(means, rel=1e-5)
    run.assert_gradients_as_told("update", "GPT")
    # Each estimate_loss batch is an EVAL step with its loss.
    assert run.saved_losses(ModeKeys.EVAL) == pytest.approx(
        [record["loss"] for record in run.told("eval")], rel=1e-6
    )


def test_lightning_evaluation_and_test_losses_that_are_plain_expressions(tmp_path: Path) -> None:
    # Lightning's BoringModel: every loss is self(batch).sum(); validation_step returns and
    # logs its loss, test_step only logs it.
    run = ScriptRun(tmp_path, "lightning_plain_eval.py", options=("--no-profiler",))
    assert run.saved_losses(ModeKeys.TRAIN) == pytest.approx(
        [record["loss"] for record in run.told("train")], rel=1e-6
    )
    evaluations = [record["loss"] for record in run.told("eval")]
    assert len(evaluations) == 6  # two validations of two batches, then two test batches
    assert run.saved_losses(ModeKeys.EVAL) == pytest.approx(evaluations, rel=1e-6)
