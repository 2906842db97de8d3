"""Small real PyTorch trainings, hooked by trainprobe, for the built-in rule tests.

``train`` runs a model on in-memory data for a few steps (a fraction of a second each), saves
what the test asks for at every step, and returns the trial. A test changes one thing (the
learning rate, an initialisation, the data) to make a training exhibit a condition, and keeps
everything else the same for the training that does not.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.analysis.trial import Trial
from trainprobe.trials import create_trial

TRAIN, EVAL = smd.modes.TRAIN, smd.modes.EVAL


@dataclass
class Data:
    """Inputs and targets, trained on in batches of ``batch_size`` (all at once when None)."""

    inputs: torch.Tensor
    targets: torch.Tensor
    batch_size: int | None = None

    def batches(self, generator: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """One pass over the data in a shuffled order."""
        if self.batch_size is None:
            return [(self.inputs, self.targets)]
        order = torch.randperm(len(self.inputs), generator=generator)
        return [
            (
                self.inputs[order[i : i + self.batch_size]],
                self.targets[order[i : i + self.batch_size]],
            )
            for i in range(0, len(order), self.batch_size)
        ]


@dataclass
class Run:
    """How to train: what to save and when to evaluate."""

    steps: int = 10
    lr: float = 0.1
    loss: nn.Module = field(default_factory=nn.CrossEntropyLoss)
    collections: Sequence[str] = ("losses",)
    include_regex: Sequence[str] | None = None
    eval_data: Data | None = None
    eval_every: int = 0
    eval_steps: int = 1
    save_labels: bool = False
    seed: int = 0
    train: bool = True


def _save_labels(hook: smd.Hook, targets: torch.Tensor, outputs: torch.Tensor) -> None:
    hook.save_tensor("labels", targets, "labels")
    hook.save_tensor("predictions", outputs.argmax(dim=1), "predictions")


def train(out: Path, model: nn.Module, data: Data, run: Run) -> Trial:
    """Train ``model`` on ``data`` for ``run.steps`` steps, saving every step; the trial.

    With ``eval_data`` and ``eval_every``, ``eval_steps`` EVAL steps follow every
    ``eval_every`` training steps. ``save_labels`` saves each EVAL step's ``labels`` and
    ``predictions`` (the argmax of the model's output). ``train=False`` runs the forward and
    backward passes but never updates the weights (a frozen model).
    """
    generator = torch.Generator().manual_seed(run.seed)
    hook = smd.Hook(
        str(out),
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=list(run.collections),
        include_regex=list(run.include_regex) if run.include_regex else None,
    )
    hook.register_module(model)
    hook.register_loss(run.loss)
    optimizer = torch.optim.SGD(model.parameters(), lr=run.lr)
    done = 0
    while done < run.steps:
        for inputs, targets in data.batches(generator):
            if done == run.steps:
                break
            hook.set_mode(TRAIN)
            optimizer.zero_grad()
            outputs = model(inputs)
            run.loss(outputs, targets).backward()
            if run.train:
                optimizer.step()
            done += 1
            if run.eval_data is not None and run.eval_every and done % run.eval_every == 0:
                evaluate(hook, model, run.eval_data, run, generator)
    hook.close()
    return create_trial(str(out))


def evaluate(
    hook: smd.Hook, model: nn.Module, data: Data, run: Run, generator: torch.Generator
) -> None:
    """``run.eval_steps`` EVAL steps over ``data``."""
    hook.set_mode(EVAL)
    batches = data.batches(generator)
    with torch.no_grad():
        for index in range(run.eval_steps):
            inputs, targets = batches[index % len(batches)]
            outputs = model(inputs)
            run.loss(outputs, targets)
            if run.save_labels:
                _save_labels(hook, targets, outputs)


def classes(count: int, features: int, *, seed: int, balance: Sequence[float] = (0.5, 0.5)) -> Data:
    """A separable classification problem: the class shifts the first feature by ±3."""
    generator = torch.Generator().manual_seed(seed)
    shares = torch.tensor(balance, dtype=torch.float64)
    counts = (shares / shares.sum() * count).round().long()
    targets = torch.cat([torch.full((int(n),), c) for c, n in enumerate(counts)])
    targets = targets[torch.randperm(len(targets), generator=generator)]
    inputs = torch.randn(len(targets), features, generator=generator)
    inputs[:, 0] += 6.0 * targets.float() - 3.0
    return Data(inputs, targets)


def mlp(
    widths: Sequence[int], *, init: Callable[[nn.Linear], None] | None = None, seed: int = 0
) -> Net:
    """Linear layers of the given widths, each but the last followed by a ReLU.

    Layer i is ``layer<i>.fc`` (then ``layer<i>.relu``), so the saved tensors are named like
    ``Net_layer0.fc.weight`` and ``layer0.relu_output_0``. ``init`` re-initialises each linear;
    ``seed`` seeds the default initialisation.
    """
    torch.manual_seed(seed)
    blocks = []
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
        linear = nn.Linear(fan_in, fan_out)
        if init is not None:
            init(linear)
        block = nn.Module()
        block.fc = linear
        if index < len(widths) - 2:
            block.relu = nn.ReLU()
        blocks.append(block)
    return Net(blocks)


class Net(nn.Module):
    """Blocks applied in turn: each block's ``fc``, then its ``relu`` when it has one."""

    def __init__(self, blocks: Sequence[nn.Module]) -> None:
        super().__init__()
        for index, block in enumerate(blocks):
            self.add_module(f"layer{index}", block)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.children():
            x = block.fc(x)
            if hasattr(block, "relu"):
                x = block.relu(x)
        return x
