"""Reductions the hook computes on the device equal numpy's, for each dtype the hook takes.

The raw tensor is saved beside its reductions, so each saved reduction is checked against
numpy applied to the saved raw value (float64 arithmetic), as each tensor is reduced on the CPU
and as tensors are reduced together on a GPU. std and variance are population
statistics (ddof=0), the same as the trial computes from a raw tensor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hook_training import Net, run

import trainprobe.pytorch as smd
from trainprobe.capture.pytorch import device_passes
from trainprobe.trials import create_trial

ALL = ["min", "max", "mean", "std", "variance", "sum", "prod"]
NUMPY = {
    "min": np.min,
    "max": np.max,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
    "l1": lambda a: np.sum(np.abs(a)),
    "l2": lambda a: np.sqrt(np.sum(a * a)),
}


@pytest.mark.parametrize(
    "how",
    [
        "one by one",
        "batched as on a GPU",
        "batched, tensors cut in pieces",
        pytest.param(
            "on a GPU",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
        ),
    ],
)
@pytest.mark.parametrize(
    ("dtype", "rtol"), [(torch.float32, 2e-6), (torch.float64, 1e-12), (torch.bfloat16, 2e-6)]
)
def test_every_reduction_matches_numpy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype, rtol: float, how: str
) -> None:
    if how.startswith("batched"):  # the CUDA boundary: segment reductions over a flat buffer
        monkeypatch.setattr(device_passes, "BATCHED_DEVICES", {"cpu"})
    if how == "batched, tensors cut in pieces":  # each weight is longer than a piece
        monkeypatch.setattr(device_passes, "PIECE_ELEMENTS", 4)
    device = "cuda" if how == "on a GPU" else "cpu"
    torch.manual_seed(0)
    model = Net(width=5).to(device, dtype)
    config = smd.ReductionConfig(
        reductions=ALL,
        abs_reductions=ALL,
        norms=["l1", "l2"],
        abs_norms=["l1", "l2"],
        save_raw_tensor=True,
    )
    hook = smd.Hook(
        tmp_path,
        save_config=smd.SaveConfig(save_interval=1),
        reduction_config=config,
        include_collections=["weights", "biases", "gradients", "relu_output"],
    )
    hook.register_module(model)
    run(hook, model, [(smd.modes.TRAIN, 2)], dtype=dtype, device=device)
    hook.close()
    trial = create_trial(str(tmp_path))
    names = trial.tensor_names()
    assert "relu_output_0" in names and "gradient/Net_fc2.bias" in names
    checked = 0
    for name in names:
        if name.startswith("CrossEntropyLoss"):
            continue
        tensor = trial.tensor(name)
        for step in tensor.steps():
            raw = tensor.value(step).astype(np.float64)
            saved = tensor.reduction_values(step)
            assert len(saved) == 2 * len(NUMPY)
            for (op, of_abs), value in saved.items():
                expected = NUMPY[op](np.abs(raw) if of_abs else raw)
                want = np.float64 if dtype == torch.float64 else np.float32
                assert value.dtype == want, (name, op)
                np.testing.assert_allclose(value, expected, rtol=rtol, atol=1e-7, err_msg=name + op)
                checked += 1
    assert checked > 100


def test_losses_are_never_reduced(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(
        tmp_path,
        save_config=smd.SaveConfig(save_interval=1),
        reduction_config=smd.ReductionConfig(reductions=["max"]),
        include_collections=["weights", "losses"],
    )
    hook.register_module(model)
    run(hook, model, [(smd.modes.TRAIN, 1)])
    hook.close()
    trial = create_trial(str(tmp_path))
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.reduction_values(0) == {}
    assert loss.value(0).shape == ()
    weight = trial.tensor("Net_fc1.weight")
    assert list(weight.reduction_values(0)) == [("max", False)]
    assert trial.collection("losses").reduction_config["save_raw_tensor"] is True


def test_shapes_alone_are_recorded_in_the_index(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(
        tmp_path,
        save_config=smd.SaveConfig(save_interval=1),
        reduction_config=smd.ReductionConfig(save_shape=True),
        include_collections=["weights"],
    )
    hook.register_module(model)
    run(hook, model, [(smd.modes.TRAIN, 1)])
    hook.close()
    assert create_trial(str(tmp_path)).tensor("Net_fc1.weight").shape(0) == (8, 6)
