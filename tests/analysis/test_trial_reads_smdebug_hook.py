"""trainprobe's trial reads what smdebug's own PyTorch hook wrote, and finds what smdebug finds.

A short real training runs with ``smdebug.pytorch.Hook`` in the smdebug reference environment
(TRAIN and EVAL modes, a save interval, reductions without the raw tensor, a scalar); smdebug's
trial reads it back in the same process, and trainprobe's trial must agree with every answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reference_envs import run_reference
from trainprobe.exceptions import TensorUnavailableForStep
from trainprobe.trials import create_trial, modes

pytestmark = pytest.mark.slow

TRAINING = """
import json, os
os.environ["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"
import numpy as np
import torch
import torch.nn as nn
import smdebug.pytorch as smd
from smdebug import modes
from smdebug.trials import create_trial

OUT = {out!r}
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


model = Net()
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
save_config = smd.SaveConfig(mode_save_configs={{
    modes.TRAIN: smd.SaveConfigMode(save_interval=2),
    modes.EVAL: smd.SaveConfigMode(save_interval=1),
}})
hook = smd.Hook(out_dir=OUT, save_config=save_config,
                include_collections=["weights", "biases", "gradients", "losses", "relu"])
hook.get_collection("relu").include("relu_output")
hook.get_collection("gradients").reduction_config = smd.ReductionConfig(
    reductions=["mean", "max"], abs_reductions=["min"], norms=["l2"], save_raw_tensor=False)
hook.register_module(model)
hook.register_loss(loss_fn)
for epoch in range(2):
    hook.set_mode(modes.TRAIN)
    for _ in range(5):
        x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    hook.save_scalar("lr", 0.1)
    hook.set_mode(modes.EVAL)
    with torch.no_grad():
        for _ in range(2):
            loss_fn(model(torch.randn(4, 6)), torch.randint(0, 3, (4,)))
hook.close()

trial = create_trial(OUT)
tensors = {{}}
for name in trial.tensor_names():
    tensor = trial.tensor(name)
    for step in tensor.steps():
        entry = {{"mode": trial.mode(step).name, "mode_step": trial.mode_step(step)}}
        try:
            value = tensor.value(step)
            entry["value"] = value.tolist()
            entry["dtype"] = str(value.dtype)
            entry["shape"] = list(tensor.shape(step))
        except Exception as error:
            entry["error"] = type(error).__name__
        entry["reductions"] = sorted(
            [n, a, float(v)] for (n, a), v in tensor.reduction_values(step).items())
        entry["workers"] = sorted(tensor.workers(step))
        tensors.setdefault(name, {{}})[str(step)] = entry
print(json.dumps({{
    "names": trial.tensor_names(),
    "steps": trial.steps(),
    "by_mode": {{m.name: trial.steps(mode=m) for m in (modes.TRAIN, modes.EVAL)}},
    "train_names": trial.tensor_names(mode=modes.TRAIN),
    "eval_names": trial.tensor_names(mode=modes.EVAL),
    "workers": trial.workers(),
    "collections": sorted(trial.collections()),
    "weights": sorted(trial.tensor_names(collection="weights")),
    "gradients_regex": trial.collection("gradients").include_regex,
    "eval_1": trial.global_step(modes.EVAL, 1),
    "tensors": tensors,
}}))
"""


@pytest.fixture(scope="module")
def smdebug_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("smdebug-hook") / "run"
    found = run_reference("smdebug", TRAINING.format(out=str(out)))
    assert isinstance(found, dict)
    return out, found


def test_names_steps_modes_workers_and_collections(
    smdebug_run: tuple[Path, dict[str, Any]],
) -> None:
    out, smdebug = smdebug_run
    trial = create_trial(str(out))
    assert trial.loaded_all_steps
    assert trial.tensor_names() == smdebug["names"]
    assert "gradient/Net_fc1.weight" in trial.tensor_names()
    assert trial.steps() == smdebug["steps"]
    for mode_name, steps in smdebug["by_mode"].items():
        assert trial.steps(mode=modes[mode_name]) == steps
    assert len(smdebug["by_mode"]["TRAIN"]) > 0 and len(smdebug["by_mode"]["EVAL"]) > 0
    assert trial.tensor_names(mode=modes.TRAIN) == smdebug["train_names"]
    assert trial.tensor_names(mode=modes.EVAL) == smdebug["eval_names"]
    assert trial.workers() == smdebug["workers"]
    assert sorted(trial.collections()) == smdebug["collections"]
    assert trial.tensor_names(collection="weights") == smdebug["weights"]
    assert list(trial.collection("gradients").include_regex) == smdebug["gradients_regex"]
    assert trial.global_step(modes.EVAL, 1) == smdebug["eval_1"]


def test_values_shapes_and_reductions_agree(smdebug_run: tuple[Path, dict[str, Any]]) -> None:
    out, smdebug = smdebug_run
    trial = create_trial(str(out))
    compared_values = compared_reductions = 0
    for name, steps in smdebug["tensors"].items():
        tensor = trial.tensor(name)
        assert [str(s) for s in tensor.steps()] == list(steps)
        for step_text, entry in steps.items():
            step = int(step_text)
            mode, mode_step = trial.mode_modestep(step)
            assert mode is not None
            assert (mode.name, mode_step) == (entry["mode"], entry["mode_step"])
            assert tensor.workers(step) == entry["workers"]
            if "error" in entry:
                assert entry["error"] == "TensorUnavailableForStep"
                with pytest.raises(TensorUnavailableForStep):
                    tensor.value(step)
            else:
                value = tensor.value(step)
                assert str(value.dtype) == entry["dtype"]
                assert list(tensor.shape(step)) == entry["shape"]
                np.testing.assert_array_equal(value, np.array(entry["value"], dtype=value.dtype))
                by_mode = tensor.value(mode_step, mode=mode)
                np.testing.assert_array_equal(by_mode, value)
                compared_values += 1
            reductions = tensor.reduction_values(step)
            assert sorted([n, a, float(v)] for (n, a), v in reductions.items()) == [
                list(r) for r in entry["reductions"]
            ]
            for reduction_name, is_abs, reduced in entry["reductions"]:
                assert float(tensor.reduction_value(step, reduction_name, abs=is_abs)) == reduced
                compared_reductions += 1
    assert compared_values > 20
    assert compared_reductions > 20
