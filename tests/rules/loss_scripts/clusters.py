"""A small classifier on well-separated clusters, SGD at 0.05 for 300 iterations, with an
evaluation batch every 5.

Written as a user of smdebug writes it: its own hook, every step saved, the mode set around the
evaluation. ``--overfit`` trains a wide network on 32 samples of clusters that overlap: it memorises
them, and its validation loss stays far above its training loss, then climbs.

    python clusters.py OUT_DIR [--overfit] [--iterations N]

Prints one line per evaluation: ``eval ITERATION TRAIN_LOSS VALIDATION_LOSS``.
"""

import argparse

import torch
from torch import nn

import trainprobe.pytorch as smd

parser = argparse.ArgumentParser()
parser.add_argument("out_dir")
parser.add_argument("--overfit", action="store_true")
parser.add_argument("--iterations", type=int, default=300)
args = parser.parse_args()

torch.manual_seed(0)
CLASSES, FEATURES = 4, 16
centers = torch.randn(CLASSES, FEATURES) * 4


def sample(count, separation=1.0):
    labels = torch.randint(0, CLASSES, (count,))
    return separation * centers[labels] + torch.randn(count, FEATURES), labels


if args.overfit:
    # Clusters that overlap, 32 samples to learn them from, and a wide network.
    train_x, train_y = sample(32, separation=0.1)
    val_x, val_y = sample(512, separation=0.1)
    model = nn.Sequential(nn.Linear(FEATURES, 512), nn.ReLU(), nn.Linear(512, CLASSES))
else:
    train_x, train_y = sample(2048)
    val_x, val_y = sample(512)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))

hook = smd.Hook(args.out_dir, save_config=smd.SaveConfig(save_interval=1))
hook.register_module(model)
criterion = nn.CrossEntropyLoss()
hook.register_loss(criterion)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for iteration in range(args.iterations):
    model.train()
    hook.set_mode(smd.modes.TRAIN)
    batch = torch.randint(0, len(train_x), (32,))
    optimizer.zero_grad()
    loss = criterion(model(train_x[batch]), train_y[batch])
    loss.backward()
    optimizer.step()
    if (iteration + 1) % 5 == 0:
        model.eval()
        hook.set_mode(smd.modes.EVAL)
        with torch.no_grad():
            batch = torch.randint(0, len(val_x), (64,))
            val_loss = criterion(model(val_x[batch]), val_y[batch])
        print(f"eval {iteration + 1} {loss.item():.6f} {val_loss.item():.6f}")
hook.close()
