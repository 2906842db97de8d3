"""One summary of each update for every in-training rule: with the non-finite guard, LossSpike and
GradientNormSpike armed, a clean step makes one pass over the gradients and sends one copy to
the host, whatever the model's size; the spike rules judge the same gradient norm as computed by
hand, and a NaN is still traced to its gradient.

Counted as ``test_hook_dispatch_counts`` counts: the operations the hook adds to a training's
step, with a ``TorchDispatchMode``; on the GPU path forced at the CUDA boundary (values the host
reads only through a copy), and on the CPU's own path.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from test_hook_dispatch_counts import READ_BACK, added_per_step
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.capture.pytorch import host_copy
from trainprobe.storage.spike_records import read_spikes
from trainprobe.trials import create_trial


def spike_rule(rule: str, **parameters: str) -> dict[str, Any]:
    """An in-training rule's configuration, as a job writes it into the hook's configuration."""
    return {"RuleConfigurationName": rule, "RuleName": rule, "RuleParameters": parameters}


ARMED = {"training_rules": [spike_rule("LossSpike"), spike_rule("GradientNormSpike")]}


@pytest.mark.parametrize("path", ["GPU", "CPU"])
def test_a_clean_step_with_every_in_training_rule_armed_makes_one_norm_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    if path == "GPU":  # the CUDA boundary: values reach the host only through a copy
        monkeypatch.setattr(host_copy, "HOST_READS_ARE_FREE", set())
    small = added_per_step(2, out=tmp_path / "small", **ARMED)
    large = added_per_step(30, out=tmp_path / "large", **ARMED)
    assert small == large, (small, large)
    # One fused pass over the gradients for the guard's flags and the gradients' norm; no norm
    # of their norms, no second pass.
    assert small["aten._foreach_norm.Scalar"] == 1, small
    assert "aten.linalg_vector_norm.default" not in small, small
    if path == "GPU":
        assert READ_BACK not in small  # the summary goes to the host without a wait
    # The spike rules' windows judge on the device: a few dozen small operations, at most.
    assert sum(small.values()) <= 120, small


def test_the_guard_alone_keeps_its_own_cheaper_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without GradientNormSpike nor the training record no norm is wanted: the guard's largest
    # magnitudes, as before.
    monkeypatch.setattr(host_copy, "HOST_READS_ARE_FREE", set())
    added = added_per_step(2, out=tmp_path / "out", record_every_step=False)
    assert added == Counter(
        {"aten._foreach_norm.Scalar": 1, "aten.stack.default": 1, "aten._foreach_copy_.default": 1}
    )


def test_gradient_norm_spike_judges_the_gradients_global_norm(tmp_path: Path) -> None:
    # A gradient twenty times the others' at step 12: the rule names the step and the norm the
    # training's own clip_grad_norm_ measures.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    rule = spike_rule("GradientNormSpike", warmup_steps="5", window="20")
    hook = smd.Hook(str(tmp_path), training_rules=[rule], follow_training=True)
    hook.register_module(model)
    norms = []
    generator = torch.Generator().manual_seed(1)
    for step in range(16):
        x, y = torch.randn(32, 8, generator=generator), torch.randn(32, 1, generator=generator)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y * (20.0 if step == 12 else 1.0))
        loss.backward()
        norms.append(float(nn.utils.get_total_norm([p.grad for p in model.parameters()])))
        optimizer.step()
    hook.close()
    [spike] = read_spikes(str(tmp_path))
    assert (spike.rule, spike.step) == ("GradientNormSpike", 12)
    assert spike.value == pytest.approx(norms[12], rel=1e-6)


def test_with_every_rule_armed_a_nan_is_still_traced_to_its_gradient(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On the GPU path, the guard reads its flags from the summary a step late.
    monkeypatch.setattr(host_copy, "HOST_READS_ARE_FREE", set())
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    rules = [spike_rule("LossSpike"), spike_rule("GradientNormSpike")]
    hook = smd.Hook(
        str(tmp_path), save_config=smd.SaveConfig(save_interval=100), training_rules=rules
    )
    hook.register_module(model)
    inputs, labels = torch.randn(8, 6), torch.randint(0, 3, (8,))
    for step in range(6):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), labels).backward()
        if step == 3:
            model[2].bias.grad.fill_(float("nan"))  # type: ignore[union-attr]
        optimizer.step()
    hook.close()
    origin = create_trial(str(tmp_path)).nonfinite_origin()
    assert origin is not None
    assert (origin.step, origin.kind, origin.module) == (3, "gradient", "Sequential_2.bias")
    # GradientNormSpike saw the same step: a non-finite norm is always a spike.
    assert [spike.step for spike in read_spikes(str(tmp_path))][:1] == [3]
