"""A word-level language model trained the way PyTorch's word_language_model example trains it.

Nothing of trainprobe in it. Plain SGD written by hand (``p.data.add_(p.grad, alpha=-lr)``)
after gradient clipping, truncated backpropagation through time, an evaluation pass after every
epoch, and the whole model saved with ``torch.save(model, f)`` whenever validation improves; at
the end the best model is loaded back and tested. Synthetic tokens.

``--truth PATH`` writes what the script itself computed, one JSON object a line: each batch's
loss and its bias gradients as its backward pass left them (``train``), and each evaluation
batch's loss (``eval``).
"""

import argparse
import json
import math

import torch
import torch.nn as nn
from lm_model import RNNModel

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--bptt", type=int, default=8)
parser.add_argument("--lr", type=float, default=5.0)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--save", type=str, default="model.pt")
parser.add_argument("--truth", type=str, default=None)
args = parser.parse_args()

torch.manual_seed(1111)
ntokens = 50


def record(**values):
    if args.truth:
        with open(args.truth, "a") as truth:
            truth.write(json.dumps(values) + "\n")


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


generator = torch.Generator().manual_seed(0)
corpus = torch.randint(0, ntokens, (1200,), generator=generator)
train_data = batchify(corpus[:960], 8)
val_data = batchify(corpus[960:], 4)

model = RNNModel(ntokens, 16, 24, 1)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)


def evaluate(data_source):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(4)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            loss = criterion(output, targets)
            record(kind="eval", loss=loss.item())
            total_loss += len(data) * loss.item()
    return total_loss / (len(data_source) - 1)


def train(lr):
    model.train()
    hidden = model.init_hidden(8)
    for i in range(0, train_data.size(0) - 1, args.bptt):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        grads = {name: p.grad.tolist() for name, p in model.named_parameters() if "bias" in name}
        record(kind="train", loss=loss.item(), grads=grads)
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)


lr = args.lr
best_val_loss = None
for epoch in range(1, args.epochs + 1):
    train(lr)
    val_loss = evaluate(val_data)
    print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f} | ppl {math.exp(val_loss):8.2f}")
    if not best_val_loss or val_loss < best_val_loss:
        with open(args.save, "wb") as f:
            torch.save(model, f)
        best_val_loss = val_loss
    else:
        lr /= 4.0

with open(args.save, "rb") as f:
    model = torch.load(f, weights_only=False)
    model.rnn.flatten_parameters()
test_loss = evaluate(val_data)
print(f"| End of training | test loss {test_loss:5.2f}")
