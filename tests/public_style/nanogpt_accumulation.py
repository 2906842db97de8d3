"""A small GPT trained the way nanoGPT's train.py trains: gradient accumulation over micro-batches
(each loss divided by their number), gradient clipping, a ``GradScaler``, AdamW, and an
``estimate_loss()`` pass over both splits every ``--eval-interval`` iterations, in eval mode
under ``torch.no_grad()``. The model computes its loss inside ``forward`` and returns
``logits, loss``.

Nothing of trainprobe in it. ``--truth PATH`` writes, one JSON object a line, each micro-batch's
loss (``micro``), each iteration's gradients as the optimizer applied them (``update``), and
each evaluation batch's loss (``eval``). Synthetic tokens.
"""

import argparse
import json
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--max-iters", type=int, default=12)
parser.add_argument("--eval-interval", type=int, default=5)
parser.add_argument("--eval-iters", type=int, default=3)
parser.add_argument("--gradient-accumulation-steps", type=int, default=4)
parser.add_argument("--truth", type=str, default=None)
args = parser.parse_args()


def record(**values):
    if args.truth:
        with open(args.truth, "a") as truth:
            truth.write(json.dumps(values) + "\n")


block_size, vocab_size, n_embd, n_head, n_layer, batch_size = 16, 64, 32, 2, 2, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
        q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
        k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
        v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block() for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
        return logits, loss


torch.manual_seed(1337)
data = {"train": torch.randint(0, vocab_size, (4000,)), "val": torch.randint(0, vocab_size, (800,))}


def get_batch(split):
    source = data[split]
    ix = torch.randint(len(source) - block_size, (batch_size,))
    x = torch.stack([source[i : i + block_size] for i in ix])
    y = torch.stack([source[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


model = GPT()
scaler = torch.amp.GradScaler("cpu", enabled=False)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(args.eval_iters)
        for k in range(args.eval_iters):
            X, Y = get_batch(split)
            _, loss = model(X, Y)
            record(kind="eval", loss=loss.item())
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def get_lr(it):
    return 1e-3 * 0.5 * (1.0 + math.cos(math.pi * it / args.max_iters))


X, Y = get_batch("train")
iter_num = 0
while True:
    for param_group in optimizer.param_groups:
        param_group["lr"] = get_lr(iter_num)
    if iter_num % args.eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    for _ in range(args.gradient_accumulation_steps):
        _, loss = model(X, Y)
        record(kind="micro", loss=loss.item())
        loss = loss / args.gradient_accumulation_steps
        X, Y = get_batch("train")
        scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    grads = {
        name: p.grad.tolist() for name, p in model.named_parameters() if name.endswith("ln_f.bias")
    }
    record(kind="update", grads=grads)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    lossf = loss.item() * args.gradient_accumulation_steps
    print(f"iter {iter_num}: loss {lossf:.4f}")
    iter_num += 1
    if iter_num > args.max_iters:
        break
