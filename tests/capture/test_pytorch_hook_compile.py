"""The hook works on torch.compile'd modules, registered before or after compiling.

Names are those of the uncompiled model, values equal those of the same training run eagerly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hook_training import Net

import trainprobe.pytorch as smd
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

COLLECTIONS = ["weights", "gradients", "losses", "relu_output"]


def train(out: Path, compile_when: str | None) -> None:
    torch.manual_seed(0)
    model = Net()
    loss_fn = torch.nn.CrossEntropyLoss()
    hook = smd.Hook(
        out, save_config=smd.SaveConfig(save_interval=2), include_collections=COLLECTIONS
    )
    if compile_when == "before":
        model = torch.compile(model)  # type: ignore[assignment]
    hook.register_module(model)
    if compile_when == "after":
        model = torch.compile(model)  # type: ignore[assignment]
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(1)
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(5):
        optimizer.zero_grad()
        inputs, labels = torch.randn(4, 6, generator=generator), torch.tensor([0, 1, 2, 1])
        loss_fn(model(inputs), labels).backward()
        optimizer.step()
    hook.close()


@pytest.mark.parametrize("compile_when", ["before", "after"])
def test_compiled_modules_save_what_eager_ones_save(tmp_path: Path, compile_when: str) -> None:
    torch._dynamo.reset()
    train(tmp_path / "eager", None)
    train(tmp_path / "compiled", compile_when)
    eager = create_trial(str(tmp_path / "eager"))
    compiled = create_trial(str(tmp_path / "compiled"))
    assert compiled.tensor_names() == eager.tensor_names()
    assert "relu_output_0" in compiled.tensor_names()
    assert "gradient/Net_fc1.weight" in compiled.tensor_names()
    assert compiled.steps() == eager.steps() == [0, 2, 4]
    for name in eager.tensor_names():
        for step in (0, 2, 4):
            np.testing.assert_allclose(
                compiled.tensor(name).value(step),
                eager.tensor(name).value(step),
                rtol=1e-5,
                atol=1e-6,
                err_msg=f"{name} at step {step}",
            )
