"""What the hook's own Python costs per saved tensor: a model of many small layers, reductions
of its weights, biases and gradients every step, next to no hook, on the CPU.

ResNet-50 has 161 parameters: a step saving reductions of them and their gradients hands the
hook 322 tensors and its writer about 1300 scalars. On a GPU the passes over the data are a
few kernel launches whatever the tensors' number; what remains on the CPU is the hook's Python
per tensor on the training thread and the writer thread's per scalar, which holds the GIL the
training thread needs. This benchmark makes that cost visible without a GPU: ``--layers``
Linear(16, 16) layers (80 by default: 320 tensors), so small that the data costs nothing, their
reductions (mean, max, min, abs l2) every step, with the segment reductions a GPU runs
(``device_reductions.BATCHED_DEVICES`` takes in the CPU) or the CPU's own per-tensor ones.

The configurations run interleaved in one process, a chunk of steps each in turn. Printed for
each: steps/s, the ratio to no hook, the hook's own time a step, the training thread's CPU time
a step and the writer thread's. Nothing is asserted::

    python benchmarks/hook_many_tensors.py [--layers 80] [--steps 300] [--chunk 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import trainprobe.pytorch as smd
from trainprobe.capture import writer_thread
from trainprobe.capture.pytorch import device_reductions

CONFIGS = ["no hook", "reductions, batched as on a GPU", "reductions, per tensor (CPU)"]

_writer_cpu = [0.0]
_handle = writer_thread.WriterThread._handle


def _timed_handle(self: writer_thread.WriterThread, message: Any, *rest: Any) -> None:
    started = time.thread_time()
    try:
        _handle(self, message, *rest)
    finally:
        _writer_cpu[0] += time.thread_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=80)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--chunk", type=int, default=10)
    args = parser.parse_args()
    writer_thread.WriterThread._handle = _timed_handle  # type: ignore[method-assign]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    inputs = torch.randn(4, 16)
    batched = device_reductions.BATCHED_DEVICES
    with tempfile.TemporaryDirectory() as root:
        runs: dict[str, dict[str, Any]] = {}
        for name in CONFIGS:
            model = nn.Sequential(*[nn.Linear(16, 16) for _ in range(args.layers)])
            hook = None
            if name != CONFIGS[0]:
                hook = smd.Hook(
                    out_dir=tempfile.mkdtemp(dir=root),
                    save_config=smd.SaveConfig(save_interval=1),
                    reduction_config=smd.ReductionConfig(
                        reductions=["mean", "max", "min"], abs_norms=["l2"]
                    ),
                    include_collections=["weights", "biases", "gradients", "losses"],
                )
                hook.register_module(model)
                hook.set_mode(smd.modes.TRAIN)
            optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
            runs[name] = {"model": model, "hook": hook, "opt": optimizer, "wall": 0.0}
            runs[name].update(train=0.0, writer=0.0, steps=0)

        def train(name: str, steps: int) -> None:
            run = runs[name]
            device_reductions.BATCHED_DEVICES = batched | {"cpu"} if name == CONFIGS[1] else batched
            writer_before = _writer_cpu[0]
            started, cpu = time.perf_counter(), time.thread_time()
            for _ in range(steps):
                run["opt"].zero_grad()
                run["model"](inputs).square().mean().backward()
                run["opt"].step()
            if run["hook"] is not None:
                run["hook"].flush()
            run["wall"] += time.perf_counter() - started
            run["train"] += time.thread_time() - cpu
            run["writer"] += _writer_cpu[0] - writer_before
            run["steps"] += steps

        for name in CONFIGS:
            train(name, args.chunk)
            runs[name].update(wall=0.0, train=0.0, writer=0.0, steps=0)
        for index in range(max(1, args.steps // args.chunk)):
            order = CONFIGS[index % 3 :] + CONFIGS[: index % 3]
            for name in order:
                train(name, args.chunk)
        base = runs[CONFIGS[0]]["steps"] / runs[CONFIGS[0]]["wall"]
        print(f"{args.layers} layers: {4 * args.layers} tensors, reductions every step")
        print(
            f"{'configuration':34s} {'steps/s':>8s} {'ratio':>6s} {'hook ms':>8s} "
            f"{'training CPU ms':>16s} {'writer CPU ms':>14s}"
        )
        for name, run in runs.items():
            speed = run["steps"] / run["wall"]
            hook = run["hook"]
            own = 1e3 * hook.overhead.mean_seconds_per_step if hook is not None else 0.0
            print(
                f"{name:34s} {speed:8.1f} {speed / base:6.3f} {own:8.2f} "
                f"{1e3 * run['train'] / run['steps']:16.2f} "
                f"{1e3 * run['writer'] / run['steps']:14.2f}"
            )
            if hook is not None:
                hook.close()
        device_reductions.BATCHED_DEVICES = batched


if __name__ == "__main__":
    main()
