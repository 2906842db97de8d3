"""What the in-training LossSpike rule and its SkipStep action cost a clean training.

The training is ``benchmarks/hook_overhead.py``'s: an MLP 784-1024-1024-10, batch 256, SGD, on
one CPU thread (the GPU, when ``--device cuda`` is given and there is one). Three configurations
run interleaved in one process, a chunk of steps each in turn (the order rotating every round),
so that drifts in the machine's speed hit them all alike:

- no hook;
- the hook ``trainprobe run`` installs (``follow_training=True``, losses every 500 steps);
- the same hook with ``LossSpike`` and its ``SkipStep`` action armed.

No step spikes (the data is clean): what is measured is the rule's cost on every step, printed
as a share of the no-hook step time, from the time spent inside the hook (the hook's own
accounting, the least noisy) and from wall-clock time. Target: at most 0.5 %. With
``--repeat N`` the interleaved run is made N times and the medians are printed. Nothing is
asserted.

    python benchmarks/loss_spike.py [--steps 300] [--chunk 10] [--repeat 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

import trainprobe.pytorch as smd

CONFIGS = ["no hook", "hook (follow_training)", "hook + LossSpike(SkipStep)"]
RULE = {
    "RuleConfigurationName": "LossSpike",
    "RuleName": "LossSpike",
    "RuleParameters": {"action_json": json.dumps({"name": "SkipStep"})},
}


class Training:
    """One configuration's model, optimizer and hook, stepped a chunk at a time."""

    def __init__(self, name: str, out_dir: str, device: str) -> None:
        torch.manual_seed(0)
        self.model = nn.Sequential(
            nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        ).to(device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.inputs = torch.randn(256, 784, device=device)
        self.labels = torch.randint(0, 10, (256,), device=device)
        self.device = device
        self.hook = None
        if name != "no hook":
            rules = [RULE] if "LossSpike" in name else []
            self.hook = smd.Hook(out_dir, follow_training=True, training_rules=rules)
            self.hook.register_module(self.model)
        self.seconds = 0.0
        self.steps = 0

    def run(self, steps: int) -> None:
        if self.hook is not None:
            smd.set_hook(self.hook)  # only the configuration running has its hook listening
            self.hook.start_following_training()
        started = time.perf_counter()
        for _ in range(steps):
            self.optimizer.zero_grad()
            loss = nn.functional.cross_entropy(self.model(self.inputs), self.labels)
            loss.backward()
            self.optimizer.step()
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.seconds += time.perf_counter() - started
        self.steps += steps

    def hook_seconds(self) -> float:
        if self.hook is None:
            return 0.0
        return sum(self.hook.overhead.seconds_by_step.values())

    def close(self) -> None:
        if self.hook is not None:
            self.hook.close()


def measure(steps: int, warmup: int, chunk: int, device: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as root:
        trainings = [
            Training(name, str(Path(root) / str(i)), device) for i, name in enumerate(CONFIGS)
        ]
        for training in trainings:
            training.run(warmup)
            training.seconds, training.steps = 0.0, 0
        hook_before = [training.hook_seconds() for training in trainings]
        for round_index in range(steps // chunk):
            shift = round_index % len(trainings)
            for training in trainings[shift:] + trainings[:shift]:
                training.run(chunk)
        result = {
            training_name: {
                "step_ms": 1000 * training.seconds / training.steps,
                "hook_ms": 1000 * (training.hook_seconds() - before) / training.steps,
            }
            for training_name, training, before in zip(CONFIGS, trainings, hook_before, strict=True)
        }
        for training in trainings:
            training.close()
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    arguments = parser.parse_args()
    if arguments.device == "cpu":
        torch.set_num_threads(1)
    runs = [
        measure(arguments.steps, arguments.warmup, arguments.chunk, arguments.device)
        for _ in range(arguments.repeat)
    ]

    def median(name: str, key: str) -> float:
        return statistics.median(run[name][key] for run in runs)

    base = median("no hook", "step_ms")
    print(f"{arguments.device}, {arguments.steps} steps x {arguments.repeat}, medians:")
    for name in CONFIGS:
        step, inside = median(name, "step_ms"), median(name, "hook_ms")
        print(
            f"  {name:28s} {step:8.2f} ms/step  ratio {base / step:.3f}  "
            f"inside hook {inside:.3f} ms"
        )
    rule = "hook + LossSpike(SkipStep)"
    plain = "hook (follow_training)"
    inside = 100 * (median(rule, "hook_ms") - median(plain, "hook_ms")) / base
    wall = 100 * (median(rule, "step_ms") - median(plain, "step_ms")) / base
    print(
        f"LossSpike + SkipStep: {inside:+.2f} % of the no-hook step (time inside the hook), "
        f"{wall:+.2f} % (wall clock); target at most 0.5 %"
    )


if __name__ == "__main__":
    main()
