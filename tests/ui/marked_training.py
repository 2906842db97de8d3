"""A PyTorch training with one slow step and one loss spike planted, as a user's training meets
them: a data loader that stalls once, and one bad batch. It never imports trainprobe.

Usage: ``marked_training.py [--steps N] [--sleep S] [--stall-at K] [--stall S]
[--bad-batch-at J]``. Each step trains a small network on a fixed batch and sleeps ``--sleep``
seconds; before step K the batch takes ``--stall`` seconds to arrive; at step J the batch's
inputs are a hundred times too large, so its loss jumps.
"""

import argparse
import time

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--sleep", type=float, default=0.02)
    parser.add_argument("--stall-at", type=int, default=-1)
    parser.add_argument("--stall", type=float, default=1.0)
    parser.add_argument("--bad-batch-at", type=int, default=-1)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs = torch.randn(64, 6)
    labels = torch.randint(0, 3, (64,))
    for step in range(arguments.steps):
        if step == arguments.stall_at:
            time.sleep(arguments.stall)  # the data loader stalls once
        batch = inputs * 100 if step == arguments.bad_batch_at else inputs
        optimizer.zero_grad()
        loss = loss_fn(model(batch), labels)
        loss.backward()
        optimizer.step()
        time.sleep(arguments.sleep)
    print("finished", flush=True)


if __name__ == "__main__":
    main()
