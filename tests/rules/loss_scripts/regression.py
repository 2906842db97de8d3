"""A convergence loop as PyTorch's regression example writes one: fit a polynomial from random
batches, update the weights by hand, and stop once a batch's loss is below a threshold.

``--features 1`` is the broken twin: the model sees x alone, so the loss stops decreasing at
what a straight line can do, far above the threshold; the loop gives up after ``--most``
iterations.

    python regression.py OUT_DIR [--features N] [--most N]

Prints each batch's loss (``batch I loss L``), then ``Loss: L after I batches``.
"""

import argparse
from itertools import count

import torch
from torch import nn

import trainprobe.pytorch as smd

parser = argparse.ArgumentParser()
parser.add_argument("out_dir")
parser.add_argument("--features", type=int, default=4)
parser.add_argument("--most", type=int, default=400)
args = parser.parse_args()

torch.manual_seed(3)
POLY_DEGREE = 4
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, args.features + 1)], 1)


def f(x):
    """Approximated function."""
    return (torch.cat([x.unsqueeze(1) ** i for i in range(1, 5)], 1)).mm(W_target) + b_target


def get_batch(batch_size=32):
    """Builds a batch i.e. (x, f(x)) pair."""
    random = torch.randn(batch_size)
    return make_features(random), f(random)


fc = nn.Linear(args.features, 1)
criterion = nn.SmoothL1Loss()
hook = smd.Hook(args.out_dir, save_config=smd.SaveConfig(save_interval=1))
hook.register_module(fc)
hook.register_loss(criterion)
hook.set_mode(smd.modes.TRAIN)

for batch_idx in count(1):
    batch_x, batch_y = get_batch()
    fc.zero_grad()
    output = criterion(fc(batch_x), batch_y)
    loss = output.item()
    output.backward()
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad)
    print(f"batch {batch_idx} loss {loss:.9g}")
    if loss < 1e-3 or batch_idx == args.most:
        break

hook.close()
print(f"Loss: {loss:.6f} after {batch_idx} batches")
