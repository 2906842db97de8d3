"""A BERT-style classifier whose loss is computed inside its ``forward``, as Hugging Face's heads
used to: a new ``nn.CrossEntropyLoss()`` each call, returned in a tuple ``(loss, logits)``.

Nothing of trainprobe in it; a tiny ``BertModel`` from a config, synthetic tokens, no downloads.
Prints ``train_loss STEP VALUE`` each step and ``eval_loss VALUE`` for each evaluation batch.
Options: ``--steps N`` (default 12), ``--eval-every N`` (default 6), ``--lr LR`` (default 1e-3).
"""

import argparse

import torch
from torch import nn
from transformers import BertConfig, BertModel


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        config = BertConfig(
            vocab_size=50,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=32,
        )
        self.bert = BertModel(config)
        self.classifier = nn.Linear(32, 2)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> tuple:
        logits = self.classifier(self.bert(input_ids).pooler_output)
        loss_fct = nn.CrossEntropyLoss()
        return loss_fct(logits, labels), logits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--eval-every", type=int, default=6)
    parser.add_argument("--lr", type=float, default=1e-3)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    model = Classifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=arguments.lr)
    tokens = torch.randint(0, 50, (48, 12))
    labels = (tokens[:, 0] < 25).long()
    for step in range(arguments.steps):
        batch = slice(8 * (step % 4), 8 * (step % 4) + 8)
        model.train()
        loss, _ = model(tokens[batch], labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"train_loss {step} {loss.item()}", flush=True)
        if (step + 1) % arguments.eval_every == 0:
            model.eval()
            with torch.no_grad():
                loss, _ = model(tokens[40:], labels[40:])
            print(f"eval_loss {loss.item()}", flush=True)


if __name__ == "__main__":
    main()
