"""A step's reductions and scalars leave together as one batch; each value keeps its place.

Reductions of float32 and float64 tensors and ``save_scalar`` tensors of other dtypes share the
step's one buffer, each dtype in its own part: every value must come back under its own name,
in its own dtype, equal to what numpy computes from the raw tensor saved beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from hook_training import Net

import trainprobe.pytorch as smd
from trainprobe.trials import create_trial

OPS = {"max": np.max, "mean": np.mean, "min": np.min}
STEPS = 3


def test_mixed_dtypes_in_one_step_keep_their_values(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net()
    config = smd.ReductionConfig(reductions=list(OPS), abs_norms=["l2"], save_raw_tensor=True)
    hook = smd.Hook(
        tmp_path,
        save_config=smd.SaveConfig(save_interval=1),
        reduction_config=config,
        include_collections=["weights", "biases", "gradients", "doubles"],
    )
    hook.get_collection("doubles").include("^double$")
    hook.register_module(model)
    loss_fn = torch.nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(1)
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = loss_fn(model(torch.randn(4, 6, generator=generator)), torch.tensor([0, 1, 2, 0]))
        hook.save_tensor("double", torch.linspace(-1, 2, 5, dtype=torch.float64) * step, "doubles")
        hook.save_scalar("count", torch.tensor(7 + step, dtype=torch.int64))
        hook.save_scalar("ratio", torch.tensor(0.25 * step, dtype=torch.float64))
        hook.save_scalar("flag", torch.tensor(step % 2 == 1))
        loss.backward()
        optimizer.step()
    hook.close()

    trial = create_trial(str(tmp_path))
    checked = 0
    for name in ["double", "Net_fc1.weight", "Net_fc2.bias", "gradient/Net_fc1.weight"]:
        tensor = trial.tensor(name)
        assert tensor.steps() == list(range(STEPS))
        for step in tensor.steps():
            raw = tensor.value(step).astype(np.float64)
            saved = tensor.reduction_values(step)
            expected = {(op, False): f(raw) for op, f in OPS.items()}
            expected[("l2", True)] = np.sqrt(np.sum(raw * raw))
            assert set(saved) == set(expected), name
            want = np.float64 if name == "double" else np.float32
            for key, value in saved.items():
                assert value.dtype == want, (name, key)
                np.testing.assert_allclose(value, expected[key], rtol=2e-6, atol=1e-7)
                checked += 1
    assert checked == 4 * STEPS * len(expected)
    for step in range(STEPS):
        count = trial.tensor("scalar/count").value(step)
        ratio = trial.tensor("scalar/ratio").value(step)
        flag = trial.tensor("scalar/flag").value(step)
        assert (count.dtype, int(count)) == (np.dtype(np.int64), 7 + step)
        assert (ratio.dtype, float(ratio)) == (np.dtype(np.float64), 0.25 * step)
        assert (flag.dtype, bool(flag)) == (np.dtype(np.bool_), step % 2 == 1)
