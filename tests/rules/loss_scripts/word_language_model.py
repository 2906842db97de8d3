"""A recurrent language model trained the way PyTorch's word_language_model example trains it:
the weights updated by hand (``p.data.add_(p.grad, alpha=-lr)``, no optimizer), the gradients
clipped, and after each epoch an evaluation pass over the whole validation text, batch by
batch under ``torch.no_grad()``, which is far longer than num_steps.

The text is made up: each token is usually a fixed function of the one before. ``--lr 0``
is the broken twin: the weights never move, so the loss never decreases.

    python word_language_model.py OUT_DIR [--lr LR] [--epochs N]

Prints one line per epoch: ``epoch N iterations I valid_loss V``.
"""

import argparse

import torch
from torch import nn

import trainprobe.pytorch as smd

parser = argparse.ArgumentParser()
parser.add_argument("out_dir")
parser.add_argument("--lr", type=float, default=1.0)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

torch.manual_seed(0)
TOKENS, BPTT, BATCH = 24, 16, 8


def text(length):
    tokens = torch.randint(0, TOKENS, (length,))
    for i in range(1, length):
        if torch.rand(()) < 0.8:
            tokens[i] = (3 * tokens[i - 1] + 1) % TOKENS
    return tokens


def batchify(data):
    columns = len(data) // BATCH
    return data[: columns * BATCH].view(BATCH, columns).t().contiguous()


train_data = batchify(text(12 * BPTT * BATCH + BATCH))
val_data = batchify(text(20 * BPTT * BATCH + BATCH))


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(TOKENS, 32)
        self.rnn = nn.GRU(32, 32)
        self.decoder = nn.Linear(32, TOKENS)

    def forward(self, inputs):
        output, _ = self.rnn(self.encoder(inputs))
        return self.decoder(output).view(-1, TOKENS)


def get_batch(source, i):
    length = min(BPTT, len(source) - 1 - i)
    return source[i : i + length], source[i + 1 : i + 1 + length].reshape(-1)


model = RNNModel()
criterion = nn.CrossEntropyLoss()
hook = smd.Hook(args.out_dir, save_config=smd.SaveConfig(save_interval=1))
hook.register_module(model)
hook.register_loss(criterion)


def evaluate(source):
    model.eval()
    hook.set_mode(smd.modes.EVAL)
    total, batches = 0.0, 0
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, BPTT):
            inputs, targets = get_batch(source, i)
            total += criterion(model(inputs), targets).item()
            batches += 1
    return total / batches


iterations = 0
for epoch in range(1, args.epochs + 1):
    model.train()
    hook.set_mode(smd.modes.TRAIN)
    for i in range(0, train_data.size(0) - 1, BPTT):
        inputs, targets = get_batch(train_data, i)
        model.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-args.lr)
        iterations += 1
    valid_loss = evaluate(val_data)
    print(f"epoch {epoch} iterations {iterations} valid_loss {valid_loss:.4f}")
hook.close()
