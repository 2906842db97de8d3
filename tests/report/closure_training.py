"""A PyTorch training that never imports trainprobe, stepping its optimizer one of four ways.

Usage: ``closure_training.py {plain,closure,lbfgs,lightning} [--steps N]``. ``plain`` runs the
forward and backward passes, then ``optimizer.step()``; ``closure`` hands them to
``optimizer.step(closure)``, as PyTorch Lightning's automatic optimization does; ``lbfgs`` uses
``torch.optim.LBFGS``, whose step calls the closure several times; ``lightning`` is a
``lightning`` (or ``pytorch_lightning``) Trainer with automatic optimization. The model's
forward sleeps 20 ms, so the forward passes are a sizeable share of each step.
"""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, CLASSES, BATCH = 16, 3, 8


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(FEATURES, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.02)
        return self.fc(x)


def batches(steps: int) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(steps * BATCH, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (steps * BATCH,), generator=generator)
    return DataLoader(TensorDataset(inputs, labels), batch_size=BATCH)


def train(how: str, steps: int) -> None:
    model = Net()
    loss_fn = nn.CrossEntropyLoss()
    if how == "lbfgs":
        optimizer: torch.optim.Optimizer = torch.optim.LBFGS(model.parameters(), max_iter=3)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for inputs, labels in batches(steps):

        def closure(inputs: torch.Tensor = inputs, labels: torch.Tensor = labels) -> torch.Tensor:
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), labels)
            loss.backward()
            return loss

        if how == "plain":
            closure()
            optimizer.step()
        else:
            optimizer.step(closure)


def train_lightning(steps: int) -> None:
    try:
        import lightning as pl
    except ImportError:
        import pytorch_lightning as pl

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Net()
            self.loss_fn = nn.CrossEntropyLoss()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
            inputs, labels = batch
            return self.loss_fn(self(inputs), labels)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.05)

    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Module(), batches(steps))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("how", choices=("plain", "closure", "lbfgs", "lightning"))
    parser.add_argument("--steps", type=int, default=20)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    if arguments.how == "lightning":
        train_lightning(arguments.steps)
    else:
        train(arguments.how, arguments.steps)
    print("finished", flush=True)


if __name__ == "__main__":
    main()
