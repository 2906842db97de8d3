"""A small ResNet in the style of timm, trained under bf16 autocast, as its users write it.

Nothing of trainprobe in it; built from torch alone (timm needs torchvision). As timm does, the
last BatchNorm of each residual block starts at zero, so the blocks begin as identities and
their gradients are exactly zero before the first update. Prints ``train_loss STEP VALUE`` each
step and ``eval_loss VALUE`` for each evaluation batch (every ``--eval-every`` steps).
Options: ``--steps N`` (default 12), ``--eval-every N`` (default 6), ``--lr LR`` (default 0.05;
``--lr 1e6`` makes it diverge), ``--nan-at K`` (a batch of NaN inputs at step K).
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        nn.init.zeros_(self.bn2.weight)  # timm's zero_init_last

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(out)))


class ResNet(nn.Module):
    def __init__(self, width: int = 8, classes: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        self.blocks = nn.Sequential(Block(width), Block(width))
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--eval-every", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--nan-at", type=int, default=-1)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    model = ResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=arguments.lr, momentum=0.9)
    images = torch.randn(64, 3, 12, 12)
    labels = (images[:, 0].mean(dim=(1, 2)) > 0).long()
    labels += 2 * (images[:, 1, :6].mean(dim=(1, 2)) > 0).long()
    for step in range(arguments.steps):
        batch = slice(16 * (step % 3), 16 * (step % 3) + 16)
        x = images[batch].clone()
        if step == arguments.nan_at:
            x.fill_(float("nan"))
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"train_loss {step} {loss.item()}", flush=True)
        if (step + 1) % arguments.eval_every == 0:
            model.eval()
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(images[48:]), labels[48:])
            print(f"eval_loss {loss.item()}", flush=True)


if __name__ == "__main__":
    main()
