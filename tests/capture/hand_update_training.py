"""A training that updates its weights by hand, as PyTorch's word_language_model example does:
no torch.optim, gradients cleared before the forward, clipped and applied by hand, an evaluation
batch every 5 steps; under a hook that follows the training. Writes what the training saw at
each TRAIN step (its loss, the gradients' norm its clipping measured) as JSON.

    python hand_update_training.py OUT_DIR SEEN_JSON [--gpu-path]

``--gpu-path`` forces the hook's GPU path at the CUDA boundary (values reach the host only
through a copy).
"""

from __future__ import annotations

import argparse
import json

import torch
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.capture.pytorch import host_copy

parser = argparse.ArgumentParser()
parser.add_argument("out_dir")
parser.add_argument("seen")
parser.add_argument("--gpu-path", action="store_true")
arguments = parser.parse_args()
if arguments.gpu_path:
    host_copy.HOST_READS_ARE_FREE = set()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4))
hook = smd.Hook(arguments.out_dir, follow_training=True)
hook.register_module(model)
loss_fn = nn.CrossEntropyLoss()
inputs, labels = torch.randn(64, 12), torch.randint(0, 4, (64,))
seen: dict[str, list[float]] = {"loss": [], "norm": []}
for step in range(30):
    if step % 5 == 0:
        model.eval()
        with torch.no_grad():
            loss_fn(model(inputs), labels)
        model.train()
    model.zero_grad()
    loss = loss_fn(model(inputs), labels)
    loss.backward()
    seen["loss"].append(loss.item())
    seen["norm"].append(float(nn.utils.clip_grad_norm_(model.parameters(), 0.5)))
    for parameter in model.parameters():
        parameter.data.add_(parameter.grad, alpha=-0.5)
hook.close()
with open(arguments.seen, "w") as file:
    json.dump(seen, file)
