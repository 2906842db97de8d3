"""A small real PyTorch training the hook tests share."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

import trainprobe.pytorch as smd


class Net(nn.Module):
    """Two linear layers with a ReLU between them."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, width)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


@dataclass
class Seen:
    """What the training itself saw at each global step, to compare with what was saved."""

    weights: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    gradients: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    losses: dict[int, float] = field(default_factory=dict)


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy().copy()


def run(
    hook: smd.Hook,
    model: nn.Module,
    phases: list[tuple[smd.modes, int]],
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
) -> Seen:
    """Train or evaluate ``model`` (on ``device``) for each (mode, steps) phase; record what
    the steps saw."""
    generator = torch.Generator().manual_seed(seed)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    seen = Seen()
    step = 0
    for mode, count in phases:
        hook.set_mode(mode)
        for _ in range(count):
            inputs = torch.randn(4, 6, generator=generator).to(device, dtype)
            labels = torch.randint(0, 3, (4,), generator=generator).to(device)
            seen.weights[step] = {n: as_numpy(p) for n, p in model.named_parameters()}
            if mode == smd.modes.EVAL:
                with torch.no_grad():
                    seen.losses[step] = float(loss_fn(model(inputs).float(), labels))
            else:
                optimizer.zero_grad()
                loss = loss_fn(model(inputs).float(), labels)
                loss.backward()
                seen.losses[step] = float(loss.detach())
                seen.gradients[step] = {
                    n: as_numpy(p.grad) for n, p in model.named_parameters() if p.grad is not None
                }
                optimizer.step()
            step += 1
    return seen
