"""A training script that can stop writing for a while: the StalledTrainingRule tests run it.

    python stalling_training.py OUT_DIR --steps 8 --interval 0.05 --pause-after 3 --pause 4

trains a small model for ``--steps`` steps, one every ``--interval`` seconds, saving the loss at
every step; after step ``--pause-after`` it sleeps ``--pause`` seconds (a hung data loader, a
deadlock) before going on.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

import trainprobe.pytorch as smd


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--pause-after", type=int, default=-1)
    parser.add_argument("--pause", type=float, default=0.0)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(args.out_dir, save_config=smd.SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, labels = torch.randn(16, 4), torch.randint(0, 2, (16,))
    for step in range(args.steps):
        optimizer.zero_grad()
        loss_fn(model(inputs), labels).backward()
        optimizer.step()
        print(f"step {step}", flush=True)
        time.sleep(args.pause if step == args.pause_after else args.interval)
    hook.close()


if __name__ == "__main__":
    main()
