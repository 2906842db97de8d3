"""What the PyTorch hook costs a training, next to no hook at all (and next to smdebug's hook).

The training is an MLP 784-1024-1024-10, batch 256, SGD, on one CPU thread. Five configurations
run interleaved in one process, a chunk of steps each in turn (the order rotating every round), so
that drifts in the machine's speed hit them all alike:

- no hook;
- the default hook (losses every 500 steps);
- weights, biases, gradients and losses, raw, every 100 steps;
- the same as reductions (mean, max, min, abs l2) every step;
- the same raw every step.

Each chunk's time includes waiting for the hook's writer to finish what the chunk queued, so a
writer that falls behind is paid for. For every configuration the script prints steps/s, the ratio
to no hook, and the bytes written; for the last one also the write throughput next to a plain
sequential write of the same bytes. Targets (ratios): 0.99, 0.99, 0.95, 0.80. Nothing is asserted.

If the smdebug reference environment exists (``.cache/smdebug``, built by the tests), smdebug's
hook is measured at the same configurations in a subprocess of that environment, afterwards.

    python benchmarks/hook_overhead.py [--steps 200] [--warmup 10] [--chunk 10]
    python benchmarks/hook_overhead.py --steps 30     # quick smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

CONFIGS = [
    "no hook",
    "default hook (losses every 500 steps)",
    "raw every 100 steps",
    "reductions every step",
    "raw every step",
]
TARGETS = {CONFIGS[1]: 0.99, CONFIGS[2]: 0.99, CONFIGS[3]: 0.95, CONFIGS[4]: 0.80}
SAVED = ["weights", "biases", "gradients", "losses"]


def make_hook(smd: Any, name: str, out_dir: str) -> Any:
    """The hook of configuration ``name`` (smd is trainprobe.pytorch or smdebug.pytorch)."""
    if name == CONFIGS[0]:
        return None
    if name == CONFIGS[1]:
        return smd.Hook(out_dir=out_dir)
    if name == CONFIGS[2]:
        return smd.Hook(
            out_dir=out_dir,
            save_config=smd.SaveConfig(save_interval=100),
            include_collections=SAVED,
        )
    every_step = smd.SaveConfig(save_interval=1)
    if name == CONFIGS[3]:
        reductions = smd.ReductionConfig(reductions=["mean", "max", "min"], abs_norms=["l2"])
        return smd.Hook(
            out_dir=out_dir,
            save_config=every_step,
            reduction_config=reductions,
            include_collections=SAVED,
        )
    return smd.Hook(out_dir=out_dir, save_config=every_step, include_collections=SAVED)


def directory_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def measure(framework: str, steps: int, warmup: int, chunk: int, root: str) -> dict[str, Any]:
    """Run every configuration interleaved; steps/s, bytes and hook statistics for each."""
    import torch
    from torch import nn

    if framework == "trainprobe":
        sys.path.insert(0, str(REPO / "src"))
        import trainprobe.pytorch as smd
    else:
        import smdebug.pytorch as smd  # type: ignore[no-redef]

    torch.set_num_threads(1)
    torch.manual_seed(0)
    inputs, labels = torch.randn(256, 784), torch.randint(0, 10, (256,))
    runs: dict[str, dict[str, Any]] = {}
    for name in CONFIGS:
        model = nn.Sequential(
            nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        )
        loss_fn = nn.CrossEntropyLoss()
        out_dir = os.path.join(root, framework, name.split(" (")[0].replace(" ", "-"))
        hook = make_hook(smd, name, out_dir)
        if hook is not None:
            hook.register_module(model)
            hook.register_loss(loss_fn)
            hook.set_mode(smd.modes.TRAIN)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        runs[name] = {
            "model": model,
            "loss": loss_fn,
            "hook": hook,
            "opt": optimizer,
            "out": out_dir,
            "seconds": 0.0,
            "steps": 0,
            "bytes_before": 0,
        }

    def train(run: dict[str, Any], count: int) -> float:
        started = time.perf_counter()
        for _ in range(count):
            run["opt"].zero_grad()
            run["loss"](run["model"](inputs), labels).backward()
            run["opt"].step()
        hook = run["hook"]
        if hook is not None and hasattr(hook, "flush"):
            hook.flush()
        return time.perf_counter() - started

    for run in runs.values():
        train(run, warmup)
        run["bytes_before"] = written(run)
    rounds = max(1, steps // chunk)
    for index in range(rounds):
        order = CONFIGS[index % len(CONFIGS) :] + CONFIGS[: index % len(CONFIGS)]
        for name in order:
            run = runs[name]
            run["seconds"] += train(run, chunk)
            run["steps"] += chunk
    results: dict[str, Any] = {}
    for name, run in runs.items():
        results[name] = {
            "steps_per_second": run["steps"] / run["seconds"],
            "bytes": written(run) - run["bytes_before"],
            "seconds": run["seconds"],
            "steps": run["steps"],
        }
        hook = run["hook"]
        if hook is not None and framework == "trainprobe":
            results[name]["hook_ms_per_step"] = 1e3 * hook.overhead.mean_seconds_per_step
            results[name]["blocked_seconds"] = hook.overhead.blocked_seconds()
    for run in runs.values():
        if run["hook"] is not None:
            run["hook"].close()
        shutil.rmtree(run["out"], ignore_errors=True)
    return results


def written(run: dict[str, Any]) -> int:
    hook = run["hook"]
    if hook is None:
        return 0
    if hasattr(hook, "overhead"):
        return int(hook.overhead.bytes_written)
    return directory_bytes(run["out"]) if os.path.isdir(run["out"]) else 0


def plain_write_seconds(total: int, files: int, root: str) -> float:
    """Seconds to write ``total`` bytes sequentially as ``files`` files, nothing else."""
    size = max(1, total // max(1, files))
    block = os.urandom(1 << 20) * (size // (1 << 20)) + os.urandom(size % (1 << 20))
    target = os.path.join(root, "plain")
    os.makedirs(target, exist_ok=True)
    started = time.perf_counter()
    for index in range(files):
        with open(os.path.join(target, f"{index:06d}.bin"), "wb") as file:
            file.write(block)
    seconds = time.perf_counter() - started
    shutil.rmtree(target, ignore_errors=True)
    return seconds


def report(title: str, results: dict[str, Any], show_targets: bool) -> None:
    base = results[CONFIGS[0]]["steps_per_second"]
    print(f"\n{title}")
    print(f"{'configuration':40s} {'steps/s':>8s} {'ratio':>6s} {'target':>6s} {'MB written':>11s}")
    for name in CONFIGS:
        entry = results[name]
        ratio = entry["steps_per_second"] / base
        target = f"{TARGETS[name]:.2f}" if show_targets and name in TARGETS else ""
        extra = ""
        if "hook_ms_per_step" in entry:
            extra = f"  (hook {entry['hook_ms_per_step']:.2f} ms/step"
            extra += f", waited on writer {entry['blocked_seconds']:.2f} s)"
        print(
            f"{name:40s} {entry['steps_per_second']:8.1f} {ratio:6.3f} {target:>6s} "
            f"{entry['bytes'] / 1e6:11.1f}{extra}"
        )


def smdebug_python() -> Path | None:
    cache = Path(os.environ.get("TRAINPROBE_TEST_CACHE", REPO / ".cache"))
    python = cache / "smdebug" / "bin" / "python"
    return python if (cache / "smdebug" / ".complete").exists() and python.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="measured steps per configuration")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=10, help="steps per turn when interleaving")
    parser.add_argument("--framework", choices=["trainprobe", "smdebug"], default="trainprobe")
    parser.add_argument("--json", action="store_true", help="print the results as JSON only")
    parser.add_argument("--no-smdebug", action="store_true", help="skip smdebug's hook")
    args = parser.parse_args()
    chunk = min(args.chunk, args.steps)
    root = tempfile.mkdtemp(prefix="hook-overhead-")
    try:
        results = measure(args.framework, args.steps, args.warmup, chunk, root)
        if args.json:
            print(json.dumps(results))
            return
        report(f"trainprobe ({args.steps} steps each, interleaved)", results, show_targets=True)
        last = results[CONFIGS[-1]]
        plain = plain_write_seconds(last["bytes"], last["steps"], root)
        hook_rate = last["bytes"] / last["seconds"] / 1e6
        plain_rate = last["bytes"] / plain / 1e6 if plain > 0 else float("inf")
        print(
            f"\nraw every step: the hook wrote {hook_rate:.0f} MB/s while training; a plain "
            f"sequential write of the same bytes runs at {plain_rate:.0f} MB/s "
            f"({hook_rate / plain_rate:.2f} of it)"
        )
        if args.no_smdebug:
            return
        python = smdebug_python()
        if python is None:
            print("\nsmdebug: reference environment not found (.cache/smdebug); skipped")
            return
        command = [
            str(python),
            __file__,
            "--framework",
            "smdebug",
            "--json",
            "--steps",
            str(args.steps),
            "--warmup",
            str(args.warmup),
            "--chunk",
            str(chunk),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"\nsmdebug run failed:\n{done.stderr[-2000:]}")
            return
        theirs = json.loads(done.stdout.strip().splitlines()[-1])
        report("smdebug 1.0.34 (same configurations, its own process)", theirs, show_targets=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
