"""The spike rules' judgement inside a Keras step (keras ops, in float32, a ring buffer in the
step's state) is ``SpikeWindow``'s, the reference the rule's evaluator and the PyTorch hook judge
by: the same spikes on a series with a warm-up, outliers either side, a ratio and a NaN, the same
window mean, deviation and z; and the non-finite check keeps the first non-finite update.
Run eagerly on the PyTorch backend, in a process of its own (``KERAS_BACKEND``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from trainprobe.capture.spike_window import SpikeSettings, SpikeWindow

SETTINGS = SpikeSettings(window=8, sigma=3.0, warmup=4, ratio=2.5)
SERIES = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 9.0, 1.0, float("nan"), 0.98, 2.6, 1.01, 0.99, 1.03]
SERIES += [1.0, 0.97, 1.02, 1.0, -5.0, 1.01]

JUDGE_IN_THE_STEP = """
import json, math, sys
import keras
from trainprobe.capture.in_training_rules import SpikeRuleConfig
from trainprobe.storage.spike_records import SpikeAction
from trainprobe.capture.keras.step_checks import (
    RULE_FIELDS, SUMMARY_FIELDS, Observation, StepChecks,
)
from trainprobe.capture.keras.step_state import StepState
from trainprobe.capture.spike_window import SpikeSettings

settings = SpikeSettings(**json.loads(sys.argv[1]))
rule = SpikeRuleConfig("LossSpike", "LossSpike", settings, 10, 100, SpikeAction.SKIP)
state = StepState(keras.backend.backend())
checks = StepChecks(state, 2, [rule], guard=True)
found = []
for update, value in enumerate(json.loads(sys.argv[2])):
    measures = keras.ops.convert_to_tensor([1.0, 2.0])
    observation = Observation(keras.ops.convert_to_tensor(update), True, measures, None)
    skip = checks.judge(observation, keras.ops.convert_to_tensor(value, "float32"))
    summary = state.read(checks.summary_name).tolist()
    header = dict(zip(SUMMARY_FIELDS, summary))
    row = dict(zip(RULE_FIELDS, summary[len(SUMMARY_FIELDS):]))
    found.append({"skip": bool(skip), "header": header, "row": row})
print(json.dumps(found).replace("NaN", "null"))
"""


@pytest.fixture(scope="module")
def judged() -> list[dict[str, object]]:
    values = [None if v != v else v for v in SERIES]  # JSON has no NaN: null stands for it
    finished = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(JUDGE_IN_THE_STEP),
            json.dumps(SETTINGS.__dict__),
            json.dumps(values).replace("null", "NaN"),
        ],
        env={**os.environ, "KERAS_BACKEND": "torch"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    found: list[dict[str, object]] = json.loads(finished.stdout.strip().splitlines()[-1])
    return found


def test_the_step_judges_each_value_as_the_reference_window(judged: list[dict]) -> None:
    window = SpikeWindow(SETTINGS)
    spikes = []
    for update, (value, found) in enumerate(zip(SERIES, judged, strict=True)):
        verdict = window.judge(value)
        assert found["skip"] == verdict.spike, (update, value)
        if verdict.spike:
            spikes.append(update)
            row = found["row"]
            assert row["update"] == update
            if verdict.mean is not None:
                assert row["mean"] == pytest.approx(verdict.mean, rel=1e-5)
                assert row["std"] == pytest.approx(verdict.std, rel=1e-4)
                if verdict.z is not None:  # None: not finite
                    assert row["z"] == pytest.approx(verdict.z, rel=1e-4)
        assert found["row"]["spikes"] == len(spikes)
        assert found["row"]["judged"] == update + 1
    assert spikes == [6, 8, 10, 18]  # z above, a NaN, the ratio, z below


def test_the_first_non_finite_update_is_kept(judged: list[dict]) -> None:
    before, at, after = (judged[i]["header"] for i in (7, 8, len(SERIES) - 1))
    assert before["first_update"] == -1
    assert (at["first_update"], at["first_gradient"], at["loss_update"]) == (8, -1, 8)
    assert at["first_loss"] is None  # NaN: the loss it names
    assert after == {**at, "update": len(SERIES) - 1}


DEFAULT_HOOK_ON_A_NAN = """
import json, sys
import keras, numpy as np
import trainprobe.keras as tk
from trainprobe.storage.nonfinite_file import read_nonfinite_origin
from trainprobe.trials import create_trial

out = sys.argv[1]
keras.utils.set_random_seed(1)
x = np.random.default_rng(1).normal(size=(320, 4)).astype("float32")
x[3 * 8] = np.nan  # batch 3
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
model.compile("sgd", "mse")
hook = tk.Hook(out)  # the defaults: losses and metrics every 500 steps, the check every step
model.fit(x, y, batch_size=8, epochs=1, shuffle=False, callbacks=[hook], verbose=0)
hook.close()
origin = read_nonfinite_origin(out)
trial = create_trial(out)
print(json.dumps({
    "origin": [origin.step, origin.kind, origin.loss_step, origin.saved_in_full],
    "steps": trial.steps(),
    "weights": trial.tensor_names(collection="weights"),
}))
"""


def test_the_default_hook_names_a_nan_at_its_step_and_saves_a_step_in_full(tmp_path) -> None:
    """With no spike rule and nothing due (the defaults), the check still names the step the
    loss went NaN at (read later, at the end of the epoch here), and the first step saved after
    it is saved in full, weights included."""
    finished = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DEFAULT_HOOK_ON_A_NAN), str(tmp_path / "out")],
        env={**os.environ, "KERAS_BACKEND": "torch"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    found = json.loads(finished.stdout.strip().splitlines()[-1])
    assert found["origin"][:3] == [3, "loss", 3]
    assert found["steps"] == [0, 39]  # smdebug's default: step 0, and the epoch's last
    assert found["weights"] == ["dense/weights/dense/kernel:0", "dense_1/weights/dense_1/kernel:0"]
