"""Keras trainings of other shapes under ``trainprobe run``: gradient accumulation and
``steps_per_execution`` (the steps stay the optimizer's updates), and a script written for
SageMaker Debugger with smdebug's ``KerasHook``.
Each job runs in a process of its own, its backend chosen by ``KERAS_BACKEND``."""

from __future__ import annotations

import numpy as np
import pytest
from keras_jobs import RATE, batch_losses, run_job

from trainprobe.storage.modes import ModeKeys

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_gradient_accumulation_does_not_shift_the_steps(
    tmp_path_factory: pytest.TempPathFactory, backend: str
) -> None:
    job = run_job(
        tmp_path_factory,
        backend,
        "--accumulate",
        "2",
        "--epochs",
        "1",
        options=("--framework-profile",),
    )
    assert job.truth["iterations"] == 4
    # FrameworkProfile's detailed range (from step 5) ran the backend's own profiler.
    framework = job.out / "profiler-output" / "framework"
    assert list(framework.glob("*/detailed_profiling/*/000000005/**/*.json*"))
    assert job.trial.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3]
    weights = job.values("dense_1/weights/dense_1/kernel:0")
    gradients = job.values("gradients/dense_1/kernelGrad")
    for step in range(1, 4):
        applied = (weights[step - 1] - weights[step]) / RATE
        np.testing.assert_allclose(gradients[step], applied, atol=2e-4, rtol=1e-3)
    # A step's loss is the mean of its two batches' own losses.
    own = batch_losses(job.truth["logged_losses"])
    saved = job.values("batch_loss")
    expected = [(own[2 * s] + own[2 * s + 1]) / 2 for s in range(4)]
    assert [float(saved[s]) for s in range(4)] == pytest.approx(expected, rel=1e-3)


def test_steps_per_execution_names_steps_by_their_updates(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    job = run_job(tmp_path_factory, "tensorflow", "--steps-per-execution", "2", "--epochs", "1")
    assert job.truth["iterations"] == 8
    assert job.trial.steps(mode=ModeKeys.TRAIN) == [1, 3, 5, 7]


def test_an_smdebug_script_keeps_its_own_keras_hook(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    job = run_job(tmp_path_factory, "tensorflow", script="smdebug_keras.py")
    assert job.truth["same_hook"]
    assert job.trial.steps(mode=ModeKeys.TRAIN) == list(range(job.truth["iterations"]))
    assert "scalar/learning_rate" in job.trial.tensor_names(collection="sm_metrics")
    assert "removed from TensorFlow in 2.16" in job.truth["session_hook"]
