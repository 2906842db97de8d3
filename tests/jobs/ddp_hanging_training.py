"""A DistributedDataParallel training (gloo, CPU) in which one rank stops advancing: after
``--steps`` steps rank 1 dawdles for ever (in ``dawdle``), and rank 0 waits for it in an
``all_reduce`` called from ``sum_the_losses``. Run by the job runner through torchrun; it never
imports trainprobe."""

import argparse
import datetime
import time

import torch
import torch.distributed as dist
from torch import nn


def dawdle() -> None:
    while True:
        time.sleep(0.1)  # where rank 1 is


def sum_the_losses(loss: torch.Tensor) -> None:
    dist.all_reduce(loss.detach())  # where rank 0 waits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    arguments = parser.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, labels = torch.randn(5, 6), torch.randint(0, 3, (5,))
    for step in range(arguments.steps + 1):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        if step == arguments.steps and rank == 1:
            dawdle()
        if step == arguments.steps:
            sum_the_losses(loss)
        time.sleep(0.01)


if __name__ == "__main__":
    main()
