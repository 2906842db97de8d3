"""The CPU benchmarks' training: an MLP 784-1024-1024-10, batch 256, SGD, on one CPU thread, fed
by a DataLoader of 8 whole batches (no workers, so loading costs next to nothing and the wrapped
``next`` is what a profiler measures). Import torch only by making one."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any


def interleaved_arguments(description: str) -> argparse.Namespace:
    """The command line of a benchmark that interleaves configurations chunk by chunk."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=200, help="measured steps per configuration")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=20, help="steps per turn when interleaving")
    return parser.parse_args()


class MlpTraining:
    """The model, its loader and its optimizer; ``run_steps`` trains."""

    def __init__(self) -> None:
        import torch
        from torch import nn
        from torch.utils.data import DataLoader

        torch.set_num_threads(1)
        torch.manual_seed(0)
        batches = [(torch.randn(256, 784), torch.randint(0, 10, (256,))) for _ in range(8)]
        self.loader: DataLoader[Any] = DataLoader(batches, batch_size=None)  # type: ignore[arg-type]
        self.model = nn.Sequential(
            nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        )
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def run_steps(self, count: int, before: Callable[[int], None] | None = None) -> list[float]:
        """Train ``count`` steps; the seconds each took (its batch included). ``before(i)``
        runs before the i-th step's forward."""
        times: list[float] = []
        while len(times) < count:
            started = time.perf_counter()
            for inputs, labels in self.loader:
                if before is not None:
                    before(len(times))
                self.optimizer.zero_grad()
                self.loss_fn(self.model(inputs), labels).backward()
                self.optimizer.step()
                now = time.perf_counter()
                times.append(now - started)
                started = now
                if len(times) == count:
                    break
        return times
