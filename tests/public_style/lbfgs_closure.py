"""A sequence model trained with L-BFGS and a closure, as PyTorch's time_sequence_prediction
example trains its sine waves: the optimizer evaluates the closure several times a step, and the
script logs the loss ``optimizer.step(closure)`` returns; a test pass follows each step.

Nothing of trainprobe in it. ``--truth PATH`` writes, one JSON object a line, each step's loss
(what ``step`` returned) and the gradients ``.grad`` holds after it, and each test loss.
"""

import argparse
import json

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--truth", type=str, default=None)
args = parser.parse_args()


def record(**values):
    if args.truth:
        with open(args.truth, "a") as truth:
            truth.write(json.dumps(values) + "\n")


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 16)
        self.linear = nn.Linear(16, 1)

    def forward(self, input):
        outputs = []
        h_t = torch.zeros(input.size(0), 16, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 16, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            outputs += [self.linear(h_t)]
        return torch.cat(outputs, dim=1)


np.random.seed(2)
T, L, N = 20, 40, 12
x = np.empty((N, L), "int64")
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
data = np.sin(x / 1.0 / T).astype("float64")
input = torch.from_numpy(data[3:, :-1])
target = torch.from_numpy(data[3:, 1:])
test_input = torch.from_numpy(data[:3, :-1])
test_target = torch.from_numpy(data[:3, 1:])

torch.manual_seed(0)
seq = Sequence().double()
criterion = nn.MSELoss()
optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
for i in range(args.steps):
    print("STEP: ", i)

    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        print("loss:", loss.item())
        loss.backward()
        return loss

    loss = optimizer.step(closure)
    grads = {name: p.grad.tolist() for name, p in seq.named_parameters() if "bias" in name}
    record(kind="train", loss=float(loss), grads=grads)
    with torch.no_grad():
        pred = seq(test_input)
        loss = criterion(pred, test_target)
        print("test loss:", loss.item())
        record(kind="eval", loss=loss.item())
