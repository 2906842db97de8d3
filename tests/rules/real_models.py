"""Two idiomatic models whose healthy trainings have gradients that are zero or tiny by
construction, trained with trainprobe's hook as ``trainprobe run --save-interval 10`` would.

- ``resnet``: residual blocks whose last BatchNorm's weight starts at zero, as timm initialises
  them: at step 0 no gradient reaches the layers inside a block; after the first update it does.
- ``bert``: a small BERT (``transformers``' BertConfig) classifying token sequences. The
  attention's key bias gets a gradient of rounding noise at every step: softmax is invariant to
  a shift of all the scores of a query, which is all the key bias adds.

``train`` runs either for ``steps`` optimizer steps, saving the gradients and the loss every
``save_interval`` steps, and returns the output directory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

import trainprobe.pytorch as smd


class Block(nn.Module):
    """conv-BN-ReLU-conv-BN plus the identity, then ReLU; the second BN's weight starts at 0."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        nn.init.zeros_(self.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(x + branch)


class ResNet(nn.Module):
    """A stem, ``blocks`` residual blocks, global average pooling and a linear head."""

    def __init__(self, classes: int, channels: int = 8, blocks: int = 2) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
        )
        self.blocks = nn.Sequential(*(Block(channels) for _ in range(blocks)))
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class Bert(nn.Module):
    """``transformers``' BertForSequenceClassification, small, returning the logits."""

    def __init__(self, vocabulary: int, classes: int) -> None:
        super().__init__()
        from transformers import BertConfig, BertForSequenceClassification

        config = BertConfig(
            vocab_size=vocabulary,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=1,
            intermediate_size=128,
            max_position_embeddings=32,
            num_labels=classes,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        self.bert = BertForSequenceClassification(config)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.bert(input_ids=tokens).logits
        return logits


@dataclass(frozen=True)
class Task:
    """A model, the data it learns from, and its optimizer."""

    model: Callable[[], nn.Module]
    batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]]
    optimizer: Callable[[list[nn.Parameter], float], torch.optim.Optimizer]
    lr: float


def _images(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """8x8 images of noise whose class (0-3) is which quadrant is brighter."""
    targets = torch.randint(0, 4, (32,), generator=generator)
    images = torch.randn(32, 3, 8, 8, generator=generator)
    for index, target in enumerate(targets.tolist()):
        row, column = divmod(target, 2)
        images[index, :, 4 * row : 4 * row + 4, 4 * column : 4 * column + 4] += 1.0
    return images, targets


def _sequences(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of 12 tokens of 20; the class says whether token 1 occurs in the sequence, but
    one label in five is flipped, so the loss cannot fall to 0 (and its gradients with it)."""
    tokens = torch.randint(2, 20, (32, 12), generator=generator)
    targets = torch.randint(0, 2, (32,), generator=generator)
    places = torch.randint(0, 12, (32,), generator=generator)
    tokens[targets == 1, places[targets == 1]] = 1
    flipped = torch.rand(32, generator=generator) < 0.2
    return tokens, torch.where(flipped, 1 - targets, targets)


def _sgd(parameters: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(parameters, lr=lr, momentum=0.9)


def _adamw(parameters: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    return torch.optim.AdamW(parameters, lr=lr)


RESNET = Task(lambda: ResNet(classes=4), _images, _sgd, lr=0.05)
BERT = Task(lambda: Bert(vocabulary=20, classes=2), _sequences, _adamw, lr=1e-3)


def train(
    out: Path, task: Task, *, lr: float | None = None, steps: int = 100, save_interval: int = 10
) -> Path:
    """Train ``task`` (at learning rate ``lr``, its own by default), saving the gradients and
    the loss every ``save_interval`` steps into ``out``."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = task.model()
    hook = smd.Hook(
        str(out),
        save_config=smd.SaveConfig(save_interval=save_interval),
        include_collections=["gradients", "losses"],
    )
    hook.register_module(model)
    loss_function = nn.CrossEntropyLoss()
    hook.register_loss(loss_function)
    optimizer = task.optimizer(list(model.parameters()), task.lr if lr is None else lr)
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(steps):
        inputs, targets = task.batch(generator)
        optimizer.zero_grad()
        loss_function(model(inputs), targets).backward()
        optimizer.step()
    hook.close()
    return out
