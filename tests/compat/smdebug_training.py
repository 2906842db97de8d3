"""A training written for SageMaker Debugger, as smdebug's PyTorch examples write it.

Not one line refers to trainprobe: under a trainprobe job ``import smdebug`` is trainprobe's.
Usage: ``smdebug_training.py [--steps N]``; the hook comes from the job's configuration file.
"""

import argparse

import smdebug.pytorch as smd
import torch
from smdebug import modes
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook.create_from_json_file()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs = torch.randn(32, 6)
    labels = torch.randint(0, 3, (32,))
    hook.set_mode(modes.TRAIN)
    for _ in range(arguments.steps):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()
        hook.save_scalar("learning_rate", 0.05, sm_metric=True)
    hook.set_mode(smd.modes.EVAL)
    with torch.no_grad():
        loss_fn(model(inputs), labels)
    print("smdebug is", smd.__name__, flush=True)


if __name__ == "__main__":
    main()
