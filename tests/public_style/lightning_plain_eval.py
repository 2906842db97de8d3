"""Lightning's bug-report BoringModel: a module whose every loss is a plain expression
(``self(batch).sum()``), fitted with validation and then tested.

Nothing of trainprobe in it. ``validation_step`` returns its loss and logs it as
``valid_loss``; ``test_step`` only logs ``test_loss``. ``--truth PATH`` writes, one JSON object a
line, each training, validation and test batch's loss.
"""

import argparse
import json

import torch
from lightning.pytorch import LightningModule, Trainer
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--truth", type=str, default=None)
args = parser.parse_args()


def record(**values):
    if args.truth:
        with open(args.truth, "a") as truth:
            truth.write(json.dumps(values) + "\n")


class RandomDataset(Dataset):
    def __init__(self, size, length):
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return self.len


class BoringModel(LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        loss = self(batch).sum()
        record(kind="train", loss=loss.item())
        self.log("train_loss", loss)
        return {"loss": loss}

    def validation_step(self, batch, batch_idx):
        loss = self(batch).sum()
        record(kind="eval", loss=loss.item())
        self.log("valid_loss", loss)
        return loss

    def test_step(self, batch, batch_idx):
        loss = self(batch).sum()
        record(kind="eval", loss=loss.item())
        self.log("test_loss", loss)

    def configure_optimizers(self):
        return torch.optim.SGD(self.layer.parameters(), lr=0.1)


torch.manual_seed(0)
train_data = DataLoader(RandomDataset(32, 64), batch_size=2)
val_data = DataLoader(RandomDataset(32, 64), batch_size=2)
test_data = DataLoader(RandomDataset(32, 64), batch_size=2)

model = BoringModel()
trainer = Trainer(
    default_root_dir=".",
    limit_train_batches=4,
    limit_val_batches=2,
    limit_test_batches=2,
    num_sanity_val_steps=0,
    max_epochs=2,
    enable_model_summary=False,
    enable_progress_bar=False,
    logger=False,
    enable_checkpointing=False,
    accelerator="cpu",
)
trainer.fit(model, train_dataloaders=train_data, val_dataloaders=val_data)
trainer.test(model, dataloaders=test_data)
