"""DeadRelu and SaturatedActivation on hand-made trials, at the boundaries of their thresholds.

A batch of 100 samples of a 10-unit layer: a unit active in 1 sample has an activity of exactly
1 % (threshold_inactivity, not below it); 5 failing units of 10 are exactly 50 % (threshold_layer,
not above it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from builtin_trials import TrialBuilder, evidence_of, fired_steps

from trainprobe.rules.builtin import DeadRelu, SaturatedActivation

SAMPLES, UNITS = 100, 10


def _layer(failing_units: int, fail: float, active: float) -> np.ndarray:
    """A batch where ``failing_units`` units are always ``fail`` and the others are ``active``
    in exactly one sample (1 % activity) and ``fail`` otherwise."""
    batch = np.full((SAMPLES, UNITS), fail, dtype=np.float64)
    batch[0, failing_units:] = active
    return batch


def test_dead_relu_at_the_inactivity_and_layer_boundaries(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "relu_output_0", _layer(6, 0.0, 0.5))
        .add(1, "relu_output_0", _layer(5, 0.0, 0.5))
        .add(1, "relu_input_0", _layer(10, -1.0, -1.0))
        .write()
    )
    rule = DeadRelu(trial)
    assert fired_steps(rule) == [0]
    (evidence,) = evidence_of(rule)
    assert evidence.tensor == "relu_output_0"
    assert evidence.value == 60.0
    assert evidence.threshold == 50.0
    assert "60% of its 10 units are dead" in evidence.message
    # A stricter inactivity level makes the once-active units dead too.
    assert fired_steps(DeadRelu(trial, threshold_inactivity=1.5)) == [0, 1]
    assert fired_steps(DeadRelu(trial, threshold_layer="60")) == []


def test_dead_relu_conv_output_units_are_every_element_but_the_batch(tmp_path: Path) -> None:
    batch = np.ones((8, 4, 3, 3), dtype=np.float32)
    batch[:, :3] = 0.0  # 3 of 4 channels dead: 27 of 36 units
    trial = TrialBuilder(tmp_path).add(0, "features.relu_output_0", batch).write()
    rule = DeadRelu(trial)
    assert fired_steps(rule) == [0]
    assert evidence_of(rule)[0].value == 75.0


def test_saturated_tanh_at_the_boundaries(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "tanh_input_0", _layer(6, 9.5, 0.0))
        .add(1, "tanh_input_0", _layer(5, -9.5, 0.0))
        # An input exactly at the bound is outside the open range: saturated.
        .add(2, "tanh_input_0", _layer(6, 9.4999, 9.4998))
        .write()
    )
    rule = SaturatedActivation(trial)
    assert fired_steps(rule) == [0, 2]
    evidence = evidence_of(rule)
    assert evidence[0].value == 60.0
    assert "saturated" in evidence[0].message


def test_saturated_sigmoid_uses_its_own_bounds(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "sigmoid_input_0", _layer(10, 16.9, 16.9))
        .add(1, "sigmoid_input_0", _layer(6, 17.0, 0.0))
        .add(2, "sigmoid_input_0", _layer(6, -23.0, 0.0))
        .add(3, "sigmoid_input_0", _layer(6, -22.9, 0.0))
        .write()
    )
    assert fired_steps(SaturatedActivation(trial)) == [1, 2]
    narrower = SaturatedActivation(trial, threshold_sigmoid_max=16.0)
    assert fired_steps(narrower) == [0, 1, 2]


def test_saturated_activation_selects_by_collection_too(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "block.tanh_in", _layer(10, 20.0, 20.0))
        .collection("activations", names=["block.tanh_in"])
        .write()
    )
    assert fired_steps(SaturatedActivation(trial)) == []
    assert fired_steps(SaturatedActivation(trial, collection_names="activations")) == [0]
