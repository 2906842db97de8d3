"""A character-level language model trained as nanoGPT's train.py trains one, with no line of
trainprobe in it: AdamW, gradient accumulation over micro-batches, the loss computed inside
the model's forward, and every ``eval_interval`` iterations ``estimate_loss()``, the mean loss
of ``eval_iters`` batches of each split under ``torch.no_grad()`` and ``model.eval()``.

``--learning_rate 0`` is the broken twin (a schedule decayed to nothing): the loss never falls.

    python nanogpt_style.py [--learning_rate LR] [--max_iters N]
"""

import argparse

import torch
from torch import nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--learning_rate", type=float, default=3e-3)
parser.add_argument("--max_iters", type=int, default=40)
args = parser.parse_args()

eval_interval, eval_iters, gradient_accumulation_steps = 10, 4, 4
batch_size, block_size = 8, 16
torch.manual_seed(1337)

# A made-up text: each character is usually a fixed function of the one before.
vocab_size = 32
data = torch.randint(0, vocab_size, (20000,))
for i in range(1, len(data)):
    if torch.rand(()) < 0.85:
        data[i] = (5 * data[i - 1] + 3) % vocab_size
n = int(0.9 * len(data))
train_data, val_data = data[:n], data[n:]


def get_batch(split):
    source = train_data if split == "train" else val_data
    ix = torch.randint(len(source) - block_size, (batch_size,))
    x = torch.stack([source[i : i + block_size] for i in ix])
    y = torch.stack([source[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, 64)
        self.wpe = nn.Embedding(block_size, 64)
        self.mlp = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
        self.lm_head = nn.Linear(64, vocab_size)

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1))
        x = self.wte(idx) + self.wpe(pos)
        x = x + self.mlp(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


model = TinyLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.1)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            _, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


X, Y = get_batch("train")
for iter_num in range(args.max_iters + 1):
    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    if iter_num == args.max_iters:
        break
    for _micro_step in range(gradient_accumulation_steps):
        _, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps
        X, Y = get_batch("train")
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
