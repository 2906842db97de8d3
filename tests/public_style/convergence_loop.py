"""A polynomial regression trained until its loss falls under a threshold, as PyTorch's regression
example does: one ``nn.Linear``, ``F.smooth_l1_loss``, the update written by hand, no optimizer.

Nothing of trainprobe in it. ``--truth PATH`` writes each step's loss and the gradients it
updated with, one JSON object a line.
"""

import argparse
import json
from itertools import count

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--threshold", type=float, default=2e-3)
parser.add_argument("--truth", type=str, default=None)
args = parser.parse_args()

POLY_DEGREE = 3
torch.manual_seed(42)
W_target = torch.randn(POLY_DEGREE, 1) * 0.5
b_target = torch.randn(1) * 0.5


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    y = f(x)
    return x, y


fc = torch.nn.Linear(W_target.size(0), 1)

for batch_idx in count(1):
    batch_x, batch_y = get_batch()
    fc.zero_grad()
    output = F.smooth_l1_loss(fc(batch_x), batch_y)
    loss = output.item()
    output.backward()
    if args.truth:
        grads = {"weight": fc.weight.grad.tolist(), "bias": fc.bias.grad.tolist()}
        with open(args.truth, "a") as truth:
            truth.write(json.dumps({"kind": "train", "loss": loss, "grads": grads}) + "\n")
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad)
    if loss < args.threshold or batch_idx >= 400:
        break

print(f"Loss: {loss:.6f} after {batch_idx} batches")
