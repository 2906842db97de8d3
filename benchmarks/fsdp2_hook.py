"""What the hook costs a sharded training: a 2-rank FSDP2 training (gloo, CPU), steps that save
nothing (with the training record of every step, and without it) and steps that save weights,
biases, gradients and losses with reductions, next to no hook, in the same run; and the
collectives the hook adds per step.

Each rank trains four identical models, each ``fully_shard``-ed per layer: one without a hook,
two whose hooks save only every ``10**9``-th step (their steps are clean; one keeps the default
training record, whose global gradient norm takes one all-reduce a step, the other
``record_every_step=False``), one whose hook saves every step. The configurations run
interleaved, a chunk of steps each in turn, on both ranks together. The collectives the hook
adds are counted by wrapping ``torch.distributed``'s Python collectives, which the hook's
exchange and all-reduces go through (FSDP2's own do not: they are not counted), while each
configuration runs, less those counted with no hook. Printed on rank 0: steps/s, the ratio to
no hook, and the collectives the hook added per step. Nothing is asserted::

    python benchmarks/fsdp2_hook.py [--layers 8] [--width 256] [--steps 120] [--chunk 10]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import trainprobe.pytorch as smd

CONFIGS = ["no hook", "hook, clean steps", "clean steps, no record", "hook, saving every step"]
_COUNTED = ("all_gather_into_tensor", "all_gather_single", "all_reduce", "all_gather", "broadcast")
_calls = {"config": CONFIGS[0], "counts": {name: 0 for name in CONFIGS}}


def _count_collectives() -> None:
    """Wrap torch.distributed's collectives so that each call counts for the running config."""
    for name in _COUNTED:
        original = getattr(dist, name, None)
        if original is None:
            continue

        @functools.wraps(original)
        def counted(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            _calls["counts"][_calls["config"]] += 1
            return __original(*args, **kwargs)

        setattr(dist, name, counted)


def _model(layers: int, width: int) -> nn.Module:
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = nn.Sequential(
        *[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(layers)]
    )
    for block in model:
        fully_shard(block)
    fully_shard(model)
    return model


def _rank(rank: int, port: int, args: argparse.Namespace, root: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=300)
    )
    _count_collectives()
    inputs = torch.randn(16, args.width, generator=torch.Generator().manual_seed(rank))
    runs: dict[str, dict[str, Any]] = {}
    for name in CONFIGS:
        model = _model(args.layers, args.width)
        hook = None
        if name != CONFIGS[0]:
            interval = 1 if name == CONFIGS[3] else 10**9
            hook = smd.Hook(
                out_dir=os.path.join(root, f"{CONFIGS.index(name)}"),
                save_config=smd.SaveConfig(save_interval=interval),
                reduction_config=smd.ReductionConfig(
                    reductions=["mean", "max", "min"], norms=["l2"]
                ),
                include_collections=["weights", "biases", "gradients", "losses"],
                include_workers="all",
                record_every_step=name != CONFIGS[2],
            )
            hook.register_module(model)
            hook.set_mode(smd.modes.TRAIN)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        runs[name] = {"model": model, "hook": hook, "opt": optimizer, "wall": 0.0, "steps": 0}

    def train(name: str, steps: int) -> None:
        run = runs[name]
        _calls["config"] = name
        dist.barrier()
        started = time.perf_counter()
        for _ in range(steps):
            run["opt"].zero_grad()
            run["model"](inputs).square().mean().backward()
            run["opt"].step()
        if run["hook"] is not None:
            run["hook"].flush()  # the writer's exchanges counted for this configuration
        run["wall"] += time.perf_counter() - started
        run["steps"] += steps

    for name in CONFIGS:  # warm up; a clean hook's step 0 saves
        train(name, args.chunk)
        runs[name].update(wall=0.0, steps=0)
    _calls["counts"] = {name: 0 for name in CONFIGS}
    for index in range(max(1, args.steps // args.chunk)):
        turn = index % len(CONFIGS)
        for name in CONFIGS[turn:] + CONFIGS[:turn]:
            train(name, args.chunk)
    if rank == 0:
        base = runs[CONFIGS[0]]["steps"] / runs[CONFIGS[0]]["wall"]
        collectives = {name: _calls["counts"][name] / runs[name]["steps"] for name in CONFIGS}
        print(f"FSDP2 on 2 ranks (gloo): {args.layers} Linear({args.width}, {args.width}) layers")
        print(f"{'configuration':26s} {'steps/s':>8s} {'ratio':>6s} {'hook collectives/step':>22s}")
        for name, run in runs.items():
            speed = run["steps"] / run["wall"]
            added = collectives[name] - collectives[CONFIGS[0]]
            print(f"{name:26s} {speed:8.1f} {speed / base:6.3f} {added:22.2f}")
    for run in runs.values():
        if run["hook"] is not None:
            run["hook"].close()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--chunk", type=int, default=10)
    args = parser.parse_args()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with tempfile.TemporaryDirectory() as root:
        mp.spawn(_rank, args=(port, args, root), nprocs=2, join=True)


if __name__ == "__main__":
    main()
