"""A PyTorch Lightning module with validation, written as Lightning's users write it.

Nothing of trainprobe in it; synthetic data. Lightning's defaults: a sanity check of two
validation batches before training, then validation every ``--val-every`` training batches.
Prints ``train_loss STEP VALUE`` for each optimizer step (the loss ``training_step`` returned),
``val_loss VALUE`` for each validation batch (sanity check included) and, at the end,
``optimizer_steps N`` and ``validation_batches N``; with ``--predict``, it then predicts
three batches and prints ``prediction_batches N``. Options: ``--steps N`` (default 12),
``--val-every N`` (default 5), ``--lr LR`` (default 0.05).
"""

import argparse

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
        self.validation_batches = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_index):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_index):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("val_loss", loss)
        self.validation_batches += 1
        print(f"val_loss {loss.item()}", flush=True)

    def predict_step(self, batch, batch_index):
        return self(batch[0]).argmax(dim=1)

    def on_train_batch_end(self, outputs, batch, batch_index):
        print(f"train_loss {self.trainer.global_step - 1} {outputs['loss'].item()}", flush=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


def data(count: int, seed: int) -> torch.utils.data.DataLoader:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 10, generator=generator)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--val-every", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--predict", action="store_true")
    arguments = parser.parse_args()
    torch.manual_seed(0)
    model = Classifier(arguments.lr)
    trainer = L.Trainer(
        max_steps=arguments.steps,
        val_check_interval=arguments.val_every,
        limit_val_batches=2,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, data(1024, 1), data(64, 2))
    print(f"optimizer_steps {trainer.global_step}", flush=True)
    print(f"validation_batches {model.validation_batches}", flush=True)
    if arguments.predict:
        batches = trainer.predict(model, data(48, 3))
        print(f"prediction_batches {len(batches)}", flush=True)


if __name__ == "__main__":
    main()
