"""What the PyTorch hook dispatches on a step that saves nothing: a constant handful of
operations whatever the model's size, no value read back to the host, no module hooked.

On a GPU each dispatched operation is a kernel launch and each value read back a wait for the
device; counted on the CPU with a ``TorchDispatchMode``, they are the proxy for both. Counts are
exact: the hook's operations are what a training with the hook dispatches beyond the same
training without it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import trainprobe.pytorch as smd
from trainprobe.capture.pytorch import device_passes, host_copy
from trainprobe.trials import create_trial

READ_BACK = "aten._local_scalar_dense.default"
STEPS = 3


class Dispatched(TorchDispatchMode):
    """Counts the operations dispatched while it is on, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def mlp(blocks: int, device: str = "cpu") -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(blocks):
        layers += [nn.Linear(16, 16), nn.LayerNorm(16), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(16, 3)).to(device)


def reductions_every_step() -> dict[str, Any]:
    """Hook options saving parameters, gradients and losses as reductions at every step."""
    return {
        "save_config": smd.SaveConfig(save_interval=1),
        "reduction_config": smd.ReductionConfig(reductions=["mean", "max", "min"], norms=["l2"]),
        "include_collections": ["weights", "biases", "gradients", "losses"],
    }


def steps_dispatched(model: nn.Module, hook: smd.Hook | None) -> Counter[str]:
    """The operations of STEPS training steps, after two warm-up steps."""
    device = next(model.parameters()).device
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    if hook is not None:
        hook.register_module(model)
        if not hook.follow_training:
            hook.register_loss(loss_fn)
    inputs = torch.randn(8, 16, device=device)
    labels = torch.randint(0, 3, (8,), device=device)

    def step() -> None:
        optimizer.zero_grad()
        loss_fn(model(inputs), labels).backward()
        optimizer.step()

    step(), step()
    with Dispatched() as dispatched:
        for _ in range(STEPS):
            step()
    if hook is not None:
        hook.close()
    return dispatched.counts


def added_per_step(blocks: int, device: str = "cpu", **hook_options: Any) -> Counter[str]:
    alone = steps_dispatched(mlp(blocks, device), None)
    out = hook_options.pop("out")
    hooked = steps_dispatched(mlp(blocks, device), smd.Hook(str(out), **hook_options))
    added = hooked - alone
    assert all(count % STEPS == 0 for count in added.values()), added
    assert not (alone - hooked), "the hook removed operations of the training"
    return Counter({op: count // STEPS for op, count in added.items()})


RECORDED = {
    "aten.detach.default": 1,
    "aten._foreach_norm.Scalar": 1,
    "aten.stack.default": 1,
}
"""What the default hook (the guard and the training record) adds to a step on the CPU: the
norms, read as numbers, from which the global norm is summed without another operation."""


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # Without the training record: one check of the loss (its value, read) and of the
        # gradients that need one (the layers' biases): the sum of them laid end to end.
        ({"record_every_step": False}, {"aten.cat.default": 1, "aten.sum.default": 1}),
        # Following the training, the loss's watch detaches the loss it hears (a view).
        (
            {"follow_training": True, "record_every_step": False},
            {"aten.cat.default": 1, "aten.sum.default": 1, "aten.detach.default": 2},
        ),
        # With the record (the default): one norm pass over the gradients, which the guard
        # reads too, and the loss heard (detached) and read.
        ({}, RECORDED),
        (
            {"follow_training": True},
            RECORDED | {"aten.detach.default": 2},
        ),
    ],
    ids=[
        "the default hook without the record",
        "the hook trainprobe run installs without the record",
        "the default hook",
        "the hook trainprobe run installs",
    ],
)
def test_a_step_that_saves_nothing_dispatches_the_same_few_operations_for_any_model_size(
    tmp_path: Path, options: dict[str, Any], expected: dict[str, int]
) -> None:
    small = added_per_step(2, out=tmp_path / "small", **options)
    large = added_per_step(30, out=tmp_path / "large", **options)
    assert small == large == Counter(expected)
    assert sum(small.values()) <= 10
    assert READ_BACK not in small  # nothing read back: no wait for a device


def test_as_on_a_gpu_the_check_is_copied_to_the_host_and_the_parameters_kept_in_one_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CUDA boundary: flags go to the host without blocking, and the parameters the step's
    # forward used are kept for a replay (one fused copy).
    monkeypatch.setattr(host_copy, "HOST_READS_ARE_FREE", set())
    small = added_per_step(2, out=tmp_path / "small", record_every_step=False)
    large = added_per_step(30, out=tmp_path / "large", record_every_step=False)
    assert small == large
    assert small == Counter(
        {"aten._foreach_norm.Scalar": 1, "aten.stack.default": 1, "aten._foreach_copy_.default": 1}
    )
    # The record's loss and gradient norm join the same copy to the host: a few more, as many
    # for any model size, and nothing read back.
    small = added_per_step(2, out=tmp_path / "small-recorded")
    large = added_per_step(30, out=tmp_path / "large-recorded")
    assert small == large
    assert small["aten._foreach_norm.Scalar"] == 1 and small["aten._foreach_copy_.default"] == 1
    assert sum(small.values()) <= 12 and READ_BACK not in small, small


@CUDA
def test_on_a_real_gpu_a_step_that_saves_nothing_launches_a_few_kernels_and_reads_nothing(
    tmp_path: Path,
) -> None:
    small = added_per_step(2, "cuda", out=tmp_path / "small")
    large = added_per_step(30, "cuda", out=tmp_path / "large")
    assert small == large, (small, large)
    # The fused check, and the flags, the record's loss and norm, and the parameters copied
    # without blocking.
    assert small["aten._foreach_norm.Scalar"] == 1 and small["aten._foreach_copy_.default"] == 1
    assert sum(small.values()) <= 12, small
    assert READ_BACK not in small


def test_modules_are_hooked_only_in_the_steps_that_save_them(tmp_path: Path) -> None:
    model = mlp(2)
    hook = smd.Hook(str(tmp_path), save_config=smd.SaveConfig(save_steps=[2]), save_all=True)
    hook.register_module(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    hooked: list[int] = []

    def count_hooks(module: nn.Module, inputs: Any) -> None:
        hooked.append(sum(len(submodule._forward_hooks) for submodule in model[1:]))

    model.register_forward_pre_hook(count_hooks)  # runs after the hook's own step start
    for _ in range(4):
        optimizer.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        optimizer.step()
    hook.close()
    # Steps 0 (the save interval's) and 2 save every module's inputs and outputs: only then
    # are the modules hooked.
    assert create_trial(str(tmp_path)).steps() == [0, 2]
    assert hooked == [len(model) - 1, 0, len(model) - 1, 0]
    assert "6_output_0" in create_trial(str(tmp_path)).tensor_names(step=2)


def test_a_step_that_saves_only_parameters_and_gradients_hooks_no_module(tmp_path: Path) -> None:
    model = mlp(2)
    hook = smd.Hook(
        str(tmp_path),
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["weights", "biases", "gradients", "losses", "relu"],
    )
    relu = hook.get_collection("relu")  # one ReLU's output, at step 2
    relu.include("^2_output")
    relu.save_config = smd.SaveConfig(save_steps=[2])
    hook.register_module(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    hooked: list[list[str]] = []

    def count_hooks(module: nn.Module, inputs: Any) -> None:
        hooked.append([name for name, sub in model.named_children() if sub._forward_hooks])

    model.register_forward_pre_hook(count_hooks)
    for _ in range(4):
        optimizer.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        optimizer.step()
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 1, 2, 3]
    assert "gradient/Sequential_0.weight" in trial.tensor_names(step=3)
    # Only the steps that save a module's output hook that module (step 0: the collection's
    # save config also saves the first step).
    saves = [step for step in range(4) if "2_output_0" in trial.tensor_names(step=step)]
    assert saves == [0, 2]
    assert hooked == [["2"], [], ["2"], []]


def test_a_step_that_saves_reductions_dispatches_a_few_operations_per_collection_and_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CUDA boundary: reduce as on a device that launches a kernel per operation, and whose
    # values the host reads only through a copy.
    monkeypatch.setattr(device_passes, "BATCHED_DEVICES", {"cpu"})
    monkeypatch.setattr(host_copy, "HOST_READS_ARE_FREE", set())
    options = reductions_every_step()
    small = added_per_step(2, out=tmp_path / "small", **options)
    large = added_per_step(30, out=tmp_path / "large", **options)
    views = {"aten.view.default", "aten.detach.default", "aten.split_with_sizes.default"}
    small_work = Counter({op: n for op, n in small.items() if op not in views})
    large_work = Counter({op: n for op, n in large.items() if op not in views})
    # The parameters (saved at the step's start) and the gradients (when the backward ends)
    # are each reduced together: a segment reduction for min, max, sum and the l2 norm.
    assert small_work == large_work
    assert small_work["aten.segment_reduce.default"] == 8
    assert small_work["aten._foreach_norm.Scalar"] == 1  # the guard's
    assert READ_BACK not in small_work
    assert sum(small_work.values()) <= 30


@CUDA
def test_on_a_real_gpu_reductions_are_batched_per_collection(tmp_path: Path) -> None:
    options = reductions_every_step()
    small = added_per_step(2, "cuda", out=tmp_path / "small", **options)
    large = added_per_step(30, "cuda", out=tmp_path / "large", **options)
    views = {"aten.view.default", "aten.detach.default", "aten.split_with_sizes.default"}
    small_work = Counter({op: n for op, n in small.items() if op not in views})
    large_work = Counter({op: n for op, n in large.items() if op not in views})
    assert small_work == large_work, (small_work, large_work)
    assert small_work["aten.segment_reduce.default"] == 8
    assert READ_BACK not in small_work
    assert sum(small_work.values()) <= 40, small_work


@CUDA
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"follow_training": True},
        reductions_every_step(),
        {"save_config": smd.SaveConfig(save_interval=1), "save_all": True},
    ],
    ids=["the default hook", "following the training", "reductions every step", "all raw"],
)
def test_on_a_real_gpu_the_hook_never_synchronises_the_training_thread(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    # CUDA's own check: any synchronising call (a value read back, a blocking copy) raises, and
    # a strict hook lets the error through to the training. The training alone passes it.
    def train_checked(hook: smd.Hook | None) -> None:
        model = mlp(2, "cuda")
        loss_fn = nn.CrossEntropyLoss()
        if hook is not None:
            hook.register_module(model)
            if not hook.follow_training:
                hook.register_loss(loss_fn)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        inputs = torch.randn(8, 16, device="cuda")
        labels = torch.randint(0, 3, (8,), device="cuda")

        def step() -> None:
            optimizer.zero_grad()
            loss_fn(model(inputs), labels).backward()
            optimizer.step()

        step(), step()  # what is made once (segment lengths, pinned buffers) is made
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3):
                step()
        finally:
            torch.cuda.set_sync_debug_mode("default")

    train_checked(None)
    hook = smd.Hook(str(tmp_path), strict=True, **options)
    train_checked(hook)
    hook.close()
    assert len(create_trial(str(tmp_path)).steps()) >= 1
