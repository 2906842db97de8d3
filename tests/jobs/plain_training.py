"""A plain PyTorch training that never imports trainprobe: the job runner hooks it.

Usage: ``plain_training.py [--steps N] [--sleep S] [--nan-at K] [--crash-at K]
[--functional-loss] [--lr LR] [--print-losses]``. Each step trains a small network on a fixed
batch, so the loss goes down. ``--nan-at K`` turns the first layer's weights to NaN before step
K (the loss is NaN from step K on); ``--crash-at K`` raises a ValueError in step K;
``--print-losses`` prints ``loss <step> <value>`` at each step. It prints the arguments it was
given first (and ``$TRAINING_NOTE`` with its working directory, when set), and ``finished`` once
all steps ran.
"""

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--nan-at", type=int, default=-1)
    parser.add_argument("--crash-at", type=int, default=-1)
    parser.add_argument("--functional-loss", action="store_true")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--print-losses", action="store_true")
    arguments = parser.parse_args()
    print("arguments:", sys.argv[1:], flush=True)
    if "TRAINING_NOTE" in os.environ:
        print("note:", os.environ["TRAINING_NOTE"], "in", os.getcwd(), flush=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=arguments.lr)
    inputs = torch.randn(32, 6)
    labels = torch.randint(0, 3, (32,))
    for step in range(arguments.steps):
        if step == arguments.nan_at:
            with torch.no_grad():
                model[0].weight.fill_(float("nan"))
        if step == arguments.crash_at:
            raise ValueError(f"the training data ran out at step {step}")
        optimizer.zero_grad()
        outputs = model(inputs)
        if arguments.functional_loss:
            loss = F.cross_entropy(outputs, labels)
        else:
            loss = loss_fn(outputs, labels)
        loss.backward()
        optimizer.step()
        if arguments.print_losses:
            print(f"loss {step} {loss.item()!r}", flush=True)
        if arguments.sleep:
            time.sleep(arguments.sleep)
    print("finished", flush=True)


if __name__ == "__main__":
    main()
