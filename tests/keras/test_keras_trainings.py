"""Keras trainings, on each of Keras's backends, run unchanged under ``trainprobe run``.

The scripts (``trainings/``) are written as Keras users write them, with no trainprobe in them,
except the smdebug-style one, which uses smdebug's ``KerasHook`` as SageMaker's examples do. Each
records its own truth: the optimizer's iterations, the running mean of the loss Keras logged after
each batch, its final weights. The tests check what trainprobe saved against it: a TRAIN step is
an optimizer update, the saved ``loss`` is what Keras logged and ``batch_loss`` each batch's own
loss, and under plain SGD each saved gradient is the weights' change over the learning rate.
Healthy runs end with no issue; their broken twins (a NaN in the data, a learning rate that makes
the loss explode) are caught.

Each backend is chosen by ``KERAS_BACKEND`` before keras is imported, so each training runs in a
process of its own; each job runs once per module and its output is shared by the tests that
read it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from keras_jobs import BACKENDS, RATE, KerasJob, batch_losses, run_job

from trainprobe.storage.modes import ModeKeys

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=BACKENDS)
def healthy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> KerasJob:
    return run_job(tmp_path_factory, request.param, "--save", "{root}/saved")


LOAD_WITHOUT_TRAINPROBE = """
import json, sys
import keras, numpy as np
saved, truth = sys.argv[1], json.load(open(sys.argv[2]))
x, y = np.asarray(truth["x_val"], "float32"), np.asarray(truth["y_val"], "float32")
model = keras.models.load_model(f"{saved}/model.keras")
checkpoint = keras.models.load_model(f"{saved}/checkpoint.keras")
model.evaluate(x, y, verbose=0)
print(json.dumps({
    "optimizer_variables": {v.path: np.asarray(v).tolist() for v in model.optimizer.variables},
    "metrics_variables": len(model.metrics_variables),
    "json": model.to_json(),
    "from_json": len(keras.models.model_from_json(truth["json"]).weights),
    "predictions": model.predict(x, verbose=0).tolist(),
    "checkpoint": [w.tolist() for w in checkpoint.get_weights()],
}))
"""


def test_train_steps_are_the_optimizer_updates_and_every_mode_is_read(healthy: KerasJob) -> None:
    trial = healthy.trial
    assert trial.steps(mode=ModeKeys.TRAIN) == list(range(healthy.truth["iterations"]))
    # Two validations and one evaluate of 2 batches each, one predict of 2 batches.
    assert trial.steps(mode=ModeKeys.EVAL) == list(range(6))
    assert trial.steps(mode=ModeKeys.PREDICT) == [0, 1]
    assert len(trial.steps()) == 16 + 6 + 2


def test_losses_are_the_batch_own_and_keras_running_mean(healthy: KerasJob) -> None:
    logged = healthy.truth["logged_losses"]
    running = healthy.values("loss")
    assert [float(running[s]) for s in sorted(running)] == pytest.approx(logged, rel=1e-6)
    own = healthy.values("batch_loss")
    assert [float(own[s]) for s in sorted(own)] == pytest.approx(batch_losses(logged), rel=1e-3)
    assert set(healthy.trial.tensor_names(collection="losses")) == {"batch_loss", "loss"}
    assert healthy.trial.tensor_names(collection="metrics") == ["mae"]


def test_gradients_are_those_the_optimizer_applied(healthy: KerasJob) -> None:
    assert "dense/weights/dense/kernel:0" in healthy.trial.tensor_names(collection="weights")
    for layer in ("dense", "dense_1"):
        weights = healthy.values(f"{layer}/weights/{layer}/kernel:0")
        gradients = healthy.values(f"gradients/{layer}/kernelGrad")
        assert sorted(gradients) == list(range(16))
        for step in range(1, 16):
            applied = (weights[step - 1] - weights[step]) / RATE
            np.testing.assert_allclose(gradients[step], applied, atol=2e-4, rtol=1e-3)
    final = np.asarray(healthy.truth["weights"]["sequential/dense/kernel"])
    np.testing.assert_allclose(healthy.values("dense/weights/dense/kernel:0")[15], final)


def test_the_user_s_model_and_optimizer_are_as_without_the_hook(healthy: KerasJob) -> None:
    """What the hooked training saved, checkpointed, pickled and listed is what Keras gives
    without trainprobe: a process without it loads the files to the same optimizer variables
    (names and values), metrics, JSON and predictions."""
    truth = healthy.truth
    finished = subprocess.run(
        [sys.executable, "-c", LOAD_WITHOUT_TRAINPROBE, str(healthy.root / "saved"),
         str(healthy.root / "truth.json")],
        env={**os.environ, "KERAS_BACKEND": healthy.backend, "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    loaded = json.loads(finished.stdout.strip().splitlines()[-1])
    assert loaded["optimizer_variables"] == truth["optimizer_variables"]
    assert list(truth["optimizer_variables"]) == ["sgd/iteration", "sgd/learning_rate"]
    assert loaded["metrics_variables"] == truth["metrics_variables"]
    assert loaded["json"] == truth["json"] and "trainprobe" not in truth["json"]
    assert loaded["from_json"] == len(truth["get_weights"])
    np.testing.assert_allclose(loaded["predictions"], truth["predictions"], rtol=1e-6)
    np.testing.assert_allclose(truth["pickled_outputs"], truth["predictions"], rtol=1e-5)
    for kept, final in zip(loaded["checkpoint"], truth["get_weights"], strict=True):
        np.testing.assert_array_equal(kept, final)


def test_a_healthy_training_ends_with_no_issue(healthy: KerasJob) -> None:
    assert healthy.rule_status("ExplodingTensor") == "NoIssuesFound"
    assert healthy.rule_status("LossNotDecreasing") == "NoIssuesFound"
    assert not (healthy.out / "debug-output" / "nonfinite").exists()  # the checks found none
    assert "ProfilerReport" in healthy.printed and "IssuesFound" not in healthy.printed.replace(
        "NoIssuesFound", ""
    )


def test_the_step_timeline_has_every_step(healthy: KerasJob) -> None:
    from trainprobe.storage.trace_file import TraceFileReader

    reader = TraceFileReader(str(healthy.out / "profiler-output"))
    steps = [e for e in reader.events() if e.name.startswith("Step:ModeKeys.")]
    assert sum(e.name == "Step:ModeKeys.TRAIN" for e in steps) == 16
    assert sum(e.name == "Step:ModeKeys.EVAL" for e in steps) == 6
    report = list((healthy.out / "rule-output").glob("ProfilerReport*/profiler-output/*.html"))
    assert report


def test_smdebug_reads_a_keras_job(healthy: KerasJob) -> None:
    from tests.reference_envs import run_reference

    if healthy.backend != "torch":
        pytest.skip("one backend is enough: the format does not depend on it")
    found = run_reference(
        "smdebug",
        f"""
        import json
        from smdebug.trials import create_trial
        from smdebug.core.modes import ModeKeys
        trial = create_trial({str(healthy.out / "debug-output")!r})
        gradient = trial.tensor("gradients/dense/kernelGrad")
        print(json.dumps({{
            "train": trial.steps(mode=ModeKeys.TRAIN),
            "gradient": gradient.value(3, mode=ModeKeys.TRAIN).tolist(),
            "loss": float(trial.tensor("loss").value(3, mode=ModeKeys.TRAIN)),
        }}))
        """,
    )
    assert isinstance(found, dict)
    assert found["train"] == list(range(16))
    np.testing.assert_array_equal(
        np.asarray(found["gradient"], dtype=np.float32),
        healthy.values("gradients/dense/kernelGrad")[3],
    )
    assert found["loss"] == pytest.approx(healthy.truth["logged_losses"][3], rel=1e-6)
