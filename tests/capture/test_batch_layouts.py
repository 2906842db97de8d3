"""The hook remembers what the plan says of each batch of tensors it captures; a collection that
changes in the middle of a training still takes effect at the next step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hook_training import Net

import trainprobe.pytorch as smd
from trainprobe.analysis.exceptions import TensorUnavailableForStep
from trainprobe.trials import create_trial

STEPS = 5
CHANGED_AT = 2


def test_a_collection_changed_mid_training_takes_effect_at_the_next_step(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(
        tmp_path,
        save_config=smd.SaveConfig(save_interval=1),
        reduction_config=smd.ReductionConfig(reductions=["max"]),
        include_collections=["weights", "gradients", "later"],
    )
    later = hook.get_collection("later")
    later.reduction_config = smd.ReductionConfig(save_raw_tensor=True)
    hook.register_module(model)
    loss_fn = torch.nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(1)
    weights = []
    for step in range(STEPS):
        if step == CHANGED_AT:
            later.include("fc1.weight")  # from now on saved raw too
        weights.append(model.fc1.weight.detach().clone())
        optimizer.zero_grad()
        loss = loss_fn(model(torch.randn(4, 6, generator=generator)), torch.tensor([0, 1, 2, 0]))
        loss.backward()
        optimizer.step()
    hook.close()

    trial = create_trial(str(tmp_path))
    tensor = trial.tensor("Net_fc1.weight")
    assert tensor.steps() == list(range(STEPS))
    for step in range(STEPS):
        [maximum] = tensor.reduction_values(step).values()
        assert float(maximum) == float(weights[step].max())
        if step < CHANGED_AT:
            with pytest.raises(TensorUnavailableForStep):
                tensor.value(step)
        else:
            np.testing.assert_array_equal(tensor.value(step), weights[step].numpy())
    # The pattern matches anywhere in a name: the weight's gradient is saved raw from then on too.
    gradient = trial.tensor("gradient/Net_fc1.weight")
    assert gradient.steps() == list(range(STEPS))
    for step in range(STEPS):
        if step < CHANGED_AT:
            with pytest.raises(TensorUnavailableForStep):
                gradient.value(step)
        else:
            assert gradient.value(step).shape == weights[step].shape
