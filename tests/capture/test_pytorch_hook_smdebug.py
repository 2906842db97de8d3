"""smdebug 1.0.34 reads the hook's output as it reads the output of its own hook.

One training script runs twice, once with ``smdebug.pytorch`` (in the smdebug reference
environment) and once with ``trainprobe.pytorch``; smdebug's ``create_trial`` then reads both
outputs. The expected answers are not written here: they are what smdebug's trial says about
smdebug's own hook's output, and trainprobe's output must give the same ones (names, steps per
mode, values, reductions, collections). trainprobe's trial must agree too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reference_envs import reference_python, run_reference
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

TRAINING = """
import sys
import torch
import torch.nn as nn
out = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)


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
save_config = smd.SaveConfig(mode_save_configs={
    smd.modes.TRAIN: smd.SaveConfigMode(save_interval=2),
    smd.modes.EVAL: smd.SaveConfigMode(save_interval=1),
})
hook = smd.Hook(out_dir=out, save_config=save_config,
                include_collections=["weights", "biases", "gradients", "losses", "relu_output"])
hook.get_collection("relu_output").include(".*relu_output")
hook.get_collection("gradients").reduction_config = smd.ReductionConfig(
    reductions=["mean", "max"], abs_reductions=["min"], norms=["l2"], save_raw_tensor=False)
hook.get_collection("biases").reduction_config = smd.ReductionConfig(
    reductions=["min"], abs_norms=["l1"], save_raw_tensor=True)
hook.register_module(model)
hook.register_loss(loss_fn)
generator = torch.Generator().manual_seed(1)


def batch():
    x = torch.randn(4, 6, generator=generator)
    return x, torch.randint(0, 3, (4,), generator=generator)


for epoch in range(2):
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(5):
        x, y = batch()
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    hook.save_scalar("lr", 0.1)
    hook.set_mode(smd.modes.EVAL)
    with torch.no_grad():
        for _ in range(2):
            x, y = batch()
            loss_fn(model(x), y)
hook.close()
"""

READ = """
import json, os
os.environ["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"
from smdebug import modes
from smdebug.trials import create_trial


def describe(path):
    trial = create_trial(path)
    tensors = {}
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        steps = {}
        for step in tensor.steps():
            entry = {"mode": trial.mode(step).name, "mode_step": trial.mode_step(step)}
            try:
                entry["value"] = tensor.value(step).tolist()
            except Exception as error:
                entry["value"] = type(error).__name__
            entry["reductions"] = {
                f"{'abs_' if is_abs else ''}{op}": float(value)
                for (op, is_abs), value in tensor.reduction_values(step).items()
            }
            steps[str(step)] = entry
        tensors[name] = steps
    return {
        "steps": trial.steps(),
        "train_steps": trial.steps(mode=modes.TRAIN),
        "eval_steps": trial.steps(mode=modes.EVAL),
        "workers": sorted(trial.workers()),
        "tensors": tensors,
        "collections": {
            name: {
                "include_regex": sorted(c.include_regex),
                "tensor_names": sorted(c.tensor_names),
                "reduction_config": c.reduction_config and c.reduction_config.to_json_dict(),
                "save_config": c.save_config and c.save_config.to_json_dict(),
            }
            for name, c in trial.collections().items()
        },
    }


print(json.dumps({"smdebug": describe(SMDEBUG_OUT), "trainprobe": describe(TRAINPROBE_OUT)}))
"""


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("compat")
    theirs, ours = root / "smdebug", root / "trainprobe"
    _run(str(reference_python("smdebug")), "import smdebug.pytorch as smd\n" + TRAINING, theirs)
    _run(sys.executable, "import trainprobe.pytorch as smd\n" + TRAINING, ours)
    paths = f"SMDEBUG_OUT = {str(theirs)!r}\nTRAINPROBE_OUT = {str(ours)!r}\n"
    read = run_reference("smdebug", paths + READ)
    assert isinstance(read, dict)
    return theirs, ours, read


def _run(python: str, code: str, out: Path) -> None:
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [python, "-c", code, str(out)], capture_output=True, text=True, timeout=600, env=environment
    )
    assert result.returncode == 0, result.stderr[-4000:]


def mode_steps(description: dict[str, Any]) -> set[tuple[str, int]]:
    """The (mode, mode step) pairs holding tensors."""
    return {
        (entry["mode"], entry["mode_step"])
        for steps in description["tensors"].values()
        for entry in steps.values()
    }


def test_smdebug_finds_the_same_tensors_steps_and_modes(outputs: tuple[Path, Path, dict]) -> None:
    _, _, read = outputs
    theirs, ours = read["smdebug"], read["trainprobe"]
    assert ours["workers"] == theirs["workers"] == ["worker_0"]
    assert sorted(ours["tensors"]) == sorted(theirs["tensors"])
    # save_scalar values too: smdebug writes one into the next step it saves (or, at the end,
    # the last step), the latest value of each name, and so does trainprobe.
    for name, steps in theirs["tensors"].items():
        mine = ours["tensors"][name]
        assert sorted(mine) == sorted(steps), name
        for step, entry in steps.items():
            assert (mine[step]["mode"], mine[step]["mode_step"]) == (
                entry["mode"],
                entry["mode_step"],
            )
    assert mode_steps(ours) == mode_steps(theirs)
    assert ours["train_steps"] == theirs["train_steps"]
    assert ours["eval_steps"] == theirs["eval_steps"]


def test_smdebug_reads_the_same_values_and_reductions(outputs: tuple[Path, Path, dict]) -> None:
    _, _, read = outputs
    theirs, ours = read["smdebug"], read["trainprobe"]
    compared = 0
    for name, steps in theirs["tensors"].items():
        for step, entry in steps.items():
            mine = ours["tensors"][name][step]
            if isinstance(entry["value"], str):
                assert mine["value"] == entry["value"], (name, step)  # e.g. reductions only
            else:
                np.testing.assert_allclose(mine["value"], entry["value"], rtol=1e-5, atol=1e-7)
            assert sorted(mine["reductions"]) == sorted(entry["reductions"]), (name, step)
            for key, value in entry["reductions"].items():
                assert mine["reductions"][key] == pytest.approx(value, rel=1e-5, abs=1e-7)
            compared += 1
    assert compared > 40


def test_smdebug_reads_the_same_collections(outputs: tuple[Path, Path, dict]) -> None:
    _, _, read = outputs
    assert read["trainprobe"]["collections"] == read["smdebug"]["collections"]


def test_trainprobes_trial_reads_both_alike(outputs: tuple[Path, Path, dict]) -> None:
    theirs_path, ours_path, _ = outputs
    theirs, ours = create_trial(str(theirs_path)), create_trial(str(ours_path))
    assert ours.tensor_names() == theirs.tensor_names()
    assert ours.steps() == theirs.steps()
    for name in ours.tensor_names():
        assert ours.tensor(name).steps() == theirs.tensor(name).steps(), name
        for step in ours.tensor(name).steps():
            assert ours.tensor(name).reduction_values(step).keys() == (
                theirs.tensor(name).reduction_values(step).keys()
            )
