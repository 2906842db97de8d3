"""A training that creates its own hook (into the directory given as its first argument)."""

import sys

import torch
from torch import nn

import trainprobe.pytorch as smd


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(sys.argv[1], save_config=smd.SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs = torch.randn(32, 6)
    labels = torch.randint(0, 3, (32,))
    for step in range(4):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()
        hook.save_scalar("own_hook_step", float(step))
    print("finished", flush=True)


if __name__ == "__main__":
    main()
