"""A plain PyTorch training that stops advancing: after ``--steps`` steps it waits, for ever, for
a batch that never comes (in ``wait_for_a_batch_that_never_comes``). The job runner hooks it."""

import argparse
import time

import torch
from torch import nn


def wait_for_a_batch_that_never_comes() -> None:
    while True:
        time.sleep(0.1)  # the line the hang diagnosis names


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs, labels = torch.randn(32, 6), torch.randint(0, 3, (32,))
    for step in range(arguments.steps + 1):
        if step == arguments.steps:
            wait_for_a_batch_that_never_comes()
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
