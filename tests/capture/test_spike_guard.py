"""Loss spikes handled inside the step, on real trainings: skip, roll back, stop.

A regression network trains on batches of a fixed random stream; a few batches are corrupted
(their targets multiplied by 1000), which makes their loss spike far above the window. The hook
runs ``LossSpike`` with an action, as a job's ``TrainingRules`` configure it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import trainprobe.pytorch as smd
from torchrun import torchrun
from trainprobe.capture.pytorch import host_copy
from trainprobe.capture.stop_request import TrainingStopRequested
from trainprobe.config.errors import ConfigError
from trainprobe.debugger import Rule, rule_configs
from trainprobe.storage.spike_records import read_judged, read_spikes

STEPS = 60
CORRUPTED = (25, 40)


def loss_spike(action: str | None = None, **parameters: str) -> dict[str, object]:
    """A LossSpike rule configuration, as the job writes it into the hook's configuration."""
    settings = {"warmup_steps": "10", "window": "30", **parameters}
    if action == "Rollback":
        settings["action_json"] = json.dumps({"name": "Rollback", "steps": "5"})
    elif action is not None:
        settings["action_json"] = json.dumps({"name": action})
    return {
        "RuleConfigurationName": "LossSpike",
        "RuleName": "LossSpike",
        "RuleParameters": settings,
    }


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(3)
    weights = torch.randn(8, 1, generator=generator)
    found = []
    for step in range(STEPS):
        x = torch.randn(32, 8, generator=generator)
        y = x @ weights + 0.05 * torch.randn(32, 1, generator=generator)
        found.append((x, y * 1000 if step in CORRUPTED else y))
    return found


def evaluation_loss(model: nn.Module) -> float:
    generator = torch.Generator().manual_seed(99)
    weights = torch.randn(8, 1, generator=torch.Generator().manual_seed(3))
    x = torch.randn(256, 8, generator=generator)
    with torch.no_grad():
        return float(nn.functional.mse_loss(model(x), x @ weights))


OPTIMIZERS: dict[str, Callable[[list[nn.Parameter]], torch.optim.Optimizer]] = {
    "SGD": lambda p: torch.optim.SGD(p, lr=0.02),
    "SGD+momentum": lambda p: torch.optim.SGD(p, lr=0.02, momentum=0.9),
    "Adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.01),
    "AdamW fused": lambda p: torch.optim.AdamW(p, lr=0.01, fused=True),
    "Adam foreach": lambda p: torch.optim.Adam(p, lr=0.01, foreach=True),
}


def train(
    out: Path,
    optimizer_name: str,
    rules: list[Any],
    *,
    leave_out: tuple[int, ...] = (),
    before_update: Callable[[int, nn.Module, torch.optim.Optimizer], None] | None = None,
    closure: bool = False,
) -> nn.Module:
    """The trained model; its ``scheduled`` is how many steps the LR scheduler took. With
    ``closure`` each step's forward and backward run in a closure given to the optimizer's
    step, as Lightning runs them."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = OPTIMIZERS[optimizer_name](list(model.parameters()))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1000)
    hook = smd.Hook(str(out), training_rules=rules, follow_training=True)
    hook.register_module(model)
    try:
        for step, (x, y) in enumerate(batches()):
            if step in leave_out:
                continue

            def forward_and_backward() -> torch.Tensor:
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)  # noqa: B023
                loss.backward()
                return loss

            if closure:
                optimizer.step(forward_and_backward)
            else:
                forward_and_backward()
                if before_update is not None:
                    before_update(step, model, optimizer)
                optimizer.step()
            scheduler.step()
    finally:
        hook.close()
    model.scheduled = scheduler.last_epoch  # type: ignore[assignment]
    return model


def snapshot(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[bytes]:
    tensors = [tensor for tensor in model.state_dict().values()]
    for state in optimizer.state.values():
        tensors += [value for value in state.values() if isinstance(value, torch.Tensor)]
    return [tensor.detach().clone().numpy().tobytes() for tensor in tensors]


@pytest.mark.parametrize("optimizer_name", list(OPTIMIZERS))
def test_a_skipped_step_leaves_every_byte_of_model_and_optimizer_unchanged(
    tmp_path: Path, optimizer_name: str
) -> None:
    unchanged: list[bool] = []
    changed: list[bool] = []
    pending: dict[str, object] = {}

    def before_update(step: int, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        previous = pending.pop("before", None)
        if previous is not None:
            after = snapshot(pending.pop("model"), pending.pop("optimizer"))  # type: ignore[arg-type]
            (unchanged if pending.pop("step") in CORRUPTED else changed).append(previous == after)
        pending.update(
            before=snapshot(model, optimizer), model=model, optimizer=optimizer, step=step
        )

    train(tmp_path, optimizer_name, [loss_spike("SkipStep")], before_update=before_update)
    assert unchanged == [True, True], "a skipped update changed the model or the optimizer"
    assert not any(changed), "a healthy update left everything as it was"
    spikes = read_spikes(str(tmp_path))
    assert [(s.mode_step, s.action) for s in spikes] == [(25, "skip"), (40, "skip")]


@pytest.mark.parametrize("optimizer_name", ["SGD+momentum", "AdamW"])
def test_skip_step_trains_as_if_the_corrupted_batches_were_not_there(
    tmp_path: Path, optimizer_name: str
) -> None:
    clean = evaluation_loss(train(tmp_path / "clean", optimizer_name, [], leave_out=CORRUPTED))
    skipping = train(tmp_path / "skip", optimizer_name, [loss_spike("SkipStep")])
    skipped = evaluation_loss(skipping)
    # The learning-rate scheduler was not advanced for the two skipped updates.
    assert skipping.scheduled == STEPS - len(CORRUPTED)
    hurt = evaluation_loss(train(tmp_path / "none", optimizer_name, [loss_spike()]))
    assert skipped == pytest.approx(clean, rel=0.02)
    assert hurt > 10 * clean  # without the action the corrupted batches ruin the training
    # Without an action the rule still saw both spikes (and any ruined step after them).
    recorded = read_spikes(str(tmp_path / "none"))
    assert recorded[0].mode_step == CORRUPTED[0]
    assert CORRUPTED[1] in {s.mode_step for s in recorded}
    assert {s.action for s in recorded} == {"none"}
    assert all(s.z is not None and s.z > 6 for s in recorded)
    assert read_judged(str(tmp_path / "skip")) == {"LossSpike": {"TRAIN": STEPS}}


def test_skip_step_acts_after_an_optimizer_closure_ran_the_step(tmp_path: Path) -> None:
    clean = evaluation_loss(train(tmp_path / "clean", "SGD+momentum", [], leave_out=CORRUPTED))
    skipping = train(tmp_path / "skip", "SGD+momentum", [loss_spike("SkipStep")], closure=True)
    assert skipping.scheduled == STEPS - len(CORRUPTED)
    assert evaluation_loss(skipping) == pytest.approx(clean, rel=0.02)
    assert [s.mode_step for s in read_spikes(str(tmp_path / "skip"))] == list(CORRUPTED)


def test_a_healthy_training_skips_nothing(tmp_path: Path) -> None:
    train(tmp_path, "AdamW", [loss_spike("SkipStep")], leave_out=CORRUPTED)
    assert read_spikes(str(tmp_path)) == []
    assert read_judged(str(tmp_path)) == {"LossSpike": {"TRAIN": STEPS - len(CORRUPTED)}}


def test_rollback_returns_to_the_snapshot_before_the_spike(tmp_path: Path) -> None:
    clean = evaluation_loss(train(tmp_path / "clean", "SGD+momentum", [], leave_out=CORRUPTED))
    rolled = evaluation_loss(train(tmp_path / "rollback", "SGD+momentum", [loss_spike("Rollback")]))
    assert rolled < 2 * clean
    actions = [s.action for s in read_spikes(str(tmp_path / "rollback"))]
    assert actions == ["rollback", "rollback"]


def test_stop_training_stops_before_the_spiking_update(tmp_path: Path) -> None:
    seen: dict[int, list[bytes]] = {}

    def before_update(step: int, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        seen[step] = snapshot(model, optimizer)
        seen[-1] = [p.detach().clone().numpy().tobytes() for p in model.parameters()]
        models.append(model)

    models: list[nn.Module] = []
    with pytest.raises(TrainingStopRequested, match="LossSpike"):
        train(tmp_path, "AdamW", [loss_spike("StopTraining")], before_update=before_update)
    assert max(seen) == CORRUPTED[0]
    after = [p.detach().clone().numpy().tobytes() for p in models[-1].parameters()]
    assert after == seen[-1], "the spiking update was applied before the stop"
    [spike] = read_spikes(str(tmp_path))
    assert (spike.mode_step, spike.action) == (CORRUPTED[0], "stop")


def test_too_many_skips_stop_the_training(tmp_path: Path) -> None:
    # A threshold far below the training's noise would skip everything: the limit stops it.
    rules = [loss_spike("SkipStep", sigma="0.01", max_skips="3", max_skips_window="20")]
    with pytest.raises(TrainingStopRequested):
        train(tmp_path, "SGD", rules)
    actions = [s.action for s in read_spikes(str(tmp_path))]
    assert actions == ["skip", "skip", "skip", "stop"]


def test_a_bad_parameter_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"RuleParameters\.sigma.*x > 0"):
        smd.Hook(str(tmp_path), training_rules=[loss_spike(sigma="-1")])


@pytest.mark.slow
def test_every_rank_skips_the_step_one_rank_spiked_at(tmp_path: Path) -> None:
    torchrun(Path(__file__).with_name("ddp_spike_training.py"), str(tmp_path))
    applied = [(tmp_path / f"applied-{rank}.txt").read_text().split() for rank in (0, 1)]
    assert applied[0] == applied[1] == [str(step) for step in range(20) if step != 12]
    first, second = (torch.load(tmp_path / f"parameters-{rank}.pt") for rank in (0, 1))
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    # Only rank 1's loss spiked: rank 1 recorded it.
    [spike] = read_spikes(str(tmp_path))
    assert (spike.worker, spike.mode_step, spike.action) == ("worker_1", 12, "skip")


def test_skip_step_under_a_grad_scaler_and_on_a_gradient_norm_spike(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    rule = loss_spike("SkipStep")
    rule["RuleConfigurationName"] = rule["RuleName"] = "GradientNormSpike"
    hook = smd.Hook(str(tmp_path), training_rules=[rule], follow_training=True)
    hook.register_module(model)
    applied = []
    for step, (x, y) in enumerate(batches()):
        optimizer.zero_grad()
        scaler.scale(nn.functional.mse_loss(model(x), y)).backward()
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(optimizer)
        scaler.update()
        if any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True)):
            applied.append(step)
    hook.close()
    assert applied == [step for step in range(STEPS) if step not in CORRUPTED]
    spikes = read_spikes(str(tmp_path))
    assert [(s.rule, s.mode_step, s.action) for s in spikes] == [
        ("GradientNormSpike", step, "skip") for step in CORRUPTED
    ]


class HostReads(TorchDispatchMode):
    """Counts the values read from a tensor to the host (``.item()``, ``float(tensor)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("on_device", [True, False], ids=["as on a GPU", "on the CPU"])
def test_on_a_gpu_skip_step_reads_nothing_on_the_host_with_a_fused_optimizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_device: bool
) -> None:
    if on_device:
        # The CUDA boundary: judge as for a device whose values the host cannot read for free.
        monkeypatch.setattr(host_copy, "HOST_READS_ARE_FREE", set())
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, fused=True)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1000)
    hook = smd.Hook(
        str(tmp_path),
        training_rules=[loss_spike("SkipStep")],
        follow_training=True,
        nonfinite_guard=False,
    )
    hook.register_module(model)
    applied = []
    with HostReads() as reads:
        for step, (x, y) in enumerate(batches()):
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            before = [p.detach().clone() for p in model.parameters()]
            state = [v.clone() for s in optimizer.state.values() for v in s.values()]
            optimizer.step()
            scheduler.step()
            after = [v for s in optimizer.state.values() for v in s.values()]
            same = zip(before + state, [*model.parameters(), *after], strict=False)
            if len(state) != len(after) or not all(torch.equal(b, a) for b, a in same):
                applied.append(step)
    hook.close()
    assert applied == [step for step in range(STEPS) if step not in CORRUPTED]
    spikes = read_spikes(str(tmp_path))
    assert [(s.mode_step, s.action) for s in spikes] == [(step, "skip") for step in CORRUPTED]
    assert all(s.z is not None and s.z > 6 for s in spikes)
    # The scheduler skips a step for each skipped update (a step late, on the device path).
    assert scheduler.last_epoch == STEPS - len(CORRUPTED)
    if on_device:
        assert reads.count == 0  # the loss never waited for the device
    else:
        assert reads.count >= STEPS  # the host path reads each step's loss


def test_a_script_arms_the_rule_with_the_sdk_classes(tmp_path: Path) -> None:
    rule = Rule.sagemaker(
        rule_configs.loss_spike(),
        rule_parameters={"warmup_steps": "10", "window": "30"},
        actions=rule_configs.ActionList(rule_configs.SkipStep()),
    )
    applied: list[int] = []

    def before_update(step: int, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        applied.append(step)

    train(tmp_path, "AdamW", [rule], before_update=before_update)
    spikes = read_spikes(str(tmp_path))
    assert [(s.rule, s.mode_step, s.action) for s in spikes] == [
        ("LossSpike", step, "skip") for step in CORRUPTED
    ]
