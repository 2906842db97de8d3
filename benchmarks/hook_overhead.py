"""What the PyTorch hook costs a training, next to no hook at all (and next to smdebug's hook).

The training is an MLP 784-1024-1024-10, batch 256, SGD, on one CPU thread. These
configurations run interleaved in one process, a chunk of steps each in turn (the order rotating
every round), so that drifts in the machine's speed hit them all alike:

- no hook;
- the default hook (losses every 500 steps);
- weights, biases, gradients and losses, raw, every 100 steps;
- the same as reductions (mean, max, min, abs l2) every step;
- the same raw every step;
- the default hook with its non-finite guard turned off (``nonfinite_guard=False``): the
  difference to the default hook is the guard's cost, printed as a share of the no-hook step
  time from the time spent inside the hook (measured by the hook, the least noisy), from
  wall-clock time and from the training thread's CPU time (target: at most 1 %);
- the default hook without its training record (``record_every_step=False``: every step's loss,
  learning rate and gradient norm): the difference to the default hook is the record's cost,
  printed the same three ways (target: at most 1 %);
- a reference, not a hook: no hook, but a plain thread writing the bytes that raw every step
  writes, laid out as the hook lays them out (a new directory and two new files per step, each
  written under a temporary name and renamed). It is the floor the disk sets for raw every step.
- a reference, not a hook: no hook, but the passes over the data that reductions every step
  needs, made by hand in the training loop (min and max together, the sum, the l2 norm of every
  parameter before the forward pass and of every gradient after the backward pass, read once a
  step). It is the floor PyTorch's own kernels set for reductions every step.

Each chunk's time includes waiting for the hook's writer (or the plain thread) to finish what
the chunk queued, so a writer that falls behind is paid for. For every configuration the script
prints steps/s, the ratio to no hook, the bytes written, and the CPU time per step of the
training thread and of the other threads (the writer): on a machine shared with other work,
the CPU times drift less than the wall-clock ratios. With ``--repeat N`` the whole interleaved
run is made N times and the medians are printed, with the range of the ratio. It also prints
the write throughput of raw every step next to a plain sequential write of the same bytes, and
what creating one file costs in the output directory (every saved step creates three: its event
file, its index file and its event directory). Targets (ratios): 0.99, 0.99, 0.95, 0.80. Nothing
is asserted.

If the smdebug reference environment exists (``.cache/smdebug``, built by the tests), smdebug's
hook is measured at the same configurations in a subprocess of that environment, afterwards.

    python benchmarks/hook_overhead.py [--steps 200] [--warmup 10] [--chunk 10] [--repeat 1]
    python benchmarks/hook_overhead.py --steps 30     # quick smoke run
    python benchmarks/hook_overhead.py --dir DIR      # write into DIR (default: the temp dir)
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
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
PLAIN = "plain writes of raw every step's bytes"
PASSES = "reductions' passes by hand, no hook"
NO_GUARD = "default hook, non-finite guard off"
NO_RECORD = "default hook, training record off"
GUARD_TARGET = RECORD_TARGET = 0.01
TARGETS = {CONFIGS[1]: 0.99, CONFIGS[2]: 0.99, CONFIGS[3]: 0.95, CONFIGS[4]: 0.80}
SAVED = ["weights", "biases", "gradients", "losses"]


def make_hook(smd: Any, name: str, out_dir: str) -> Any:
    """The hook of configuration ``name`` (smd is trainprobe.pytorch or smdebug.pytorch)."""
    if name in (CONFIGS[0], PLAIN, PASSES):
        return None
    if name == CONFIGS[1]:
        return smd.Hook(out_dir=out_dir)
    if name == NO_GUARD:
        return smd.Hook(out_dir=out_dir, nonfinite_guard=False)
    if name == NO_RECORD:
        return smd.Hook(out_dir=out_dir, record_every_step=False)
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


class PlainWriter:
    """A thread writing ``event_bytes`` + ``index_bytes`` per step as the hook lays them out."""

    def __init__(self, out_dir: str, event_bytes: int, index_bytes: int) -> None:
        self.out_dir = out_dir
        self.block = memoryview(os.urandom(1 << 20) * (1 + event_bytes // (1 << 20)))
        self.event_bytes = event_bytes
        self.index_bytes = max(1, index_bytes)
        self.bytes_written = 0
        self._steps: queue.Queue[int | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def step(self, step: int) -> None:
        self._steps.put(step)

    def flush(self) -> None:
        self._steps.join()

    def close(self) -> None:
        self._steps.put(None)
        self._thread.join()

    def _write(self, path: str, size: int) -> None:
        temporary = path + ".tmp"
        with open(temporary, "wb") as file:
            for start in range(0, size, 1 << 20):
                file.write(self.block[start : min(size, start + (1 << 20))])
        os.replace(temporary, path)
        self.bytes_written += size

    def _run(self) -> None:
        while True:
            step = self._steps.get()
            try:
                if step is None:
                    return
                directory = os.path.join(self.out_dir, "events", f"{step:012d}")
                os.makedirs(directory, exist_ok=True)
                self._write(os.path.join(directory, "events"), self.event_bytes)
                index = os.path.join(self.out_dir, "index", f"{step // 1000:09d}")
                os.makedirs(index, exist_ok=True)
                self._write(os.path.join(index, f"{step:012d}.json"), self.index_bytes)
            finally:
                self._steps.task_done()


def step_sizes(out_dir: str) -> tuple[int, int]:
    """The sizes of the event file and the index file of the first finished step in out_dir."""
    events = sorted(Path(out_dir, "events").rglob("*.tfevents"))
    if not events:
        raise SystemExit("raw every step wrote no step during the warm-up: use --warmup 3 or more")
    index = next(Path(out_dir, "index").rglob(events[0].name.replace(".tfevents", ".json")))
    return events[0].stat().st_size, index.stat().st_size


def directory_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def measure(
    framework: str, steps: int, warmup: int, chunk: int, root: str, plain: bool
) -> dict[str, Any]:
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
    names = CONFIGS + ([PLAIN, PASSES, NO_GUARD, NO_RECORD] if plain else [])
    runs: dict[str, dict[str, Any]] = {}
    for name in names:
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
            "plain": None,
            "passes": name == PASSES,
            "opt": optimizer,
            "out": out_dir,
            "seconds": 0.0,
            "steps": 0,
            "done": 0,
            "bytes_before": 0,
            "train_cpu": 0.0,
            "other_cpu": 0.0,
        }

    def passes(tensors: list[Any]) -> Any:
        values = []
        for tensor in tensors:
            values += [*torch.aminmax(tensor), tensor.sum(), torch.linalg.vector_norm(tensor)]
        return torch.stack(values)

    def train(run: dict[str, Any], count: int) -> float:
        started = time.perf_counter()
        cpu_started, thread_started = time.process_time(), time.thread_time()
        by_hand = run["passes"]
        for _ in range(count):
            run["opt"].zero_grad()
            parameters = passes(list(run["model"].parameters())) if by_hand else None
            run["loss"](run["model"](inputs), labels).backward()
            if by_hand:
                gradients = passes([p.grad for p in run["model"].parameters()])
                parameters.tolist(), gradients.tolist()
            run["opt"].step()
            if run["plain"] is not None:
                run["plain"].step(run["done"])
            run["done"] += 1
        for writer in (run["hook"], run["plain"]):
            if writer is not None and hasattr(writer, "flush"):
                writer.flush()
        training = time.thread_time() - thread_started
        run["train_cpu"] += training
        run["other_cpu"] += time.process_time() - cpu_started - training
        return time.perf_counter() - started

    for name, run in runs.items():
        if name == PLAIN:
            run["plain"] = PlainWriter(run["out"], *step_sizes(runs[CONFIGS[4]]["out"]))
        train(run, warmup)
        run["bytes_before"] = written(run)
        run["train_cpu"] = run["other_cpu"] = 0.0
    rounds = max(1, steps // chunk)
    for index in range(rounds):
        order = names[index % len(names) :] + names[: index % len(names)]
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
            "train_cpu_ms": 1e3 * run["train_cpu"] / run["steps"],
            "other_cpu_ms": 1e3 * run["other_cpu"] / run["steps"],
        }
        hook = run["hook"]
        if hook is not None and framework == "trainprobe":
            results[name]["hook_ms_per_step"] = 1e3 * hook.overhead.mean_seconds_per_step
            results[name]["blocked_seconds"] = hook.overhead.blocked_seconds()
    for run in runs.values():
        if run["hook"] is not None:
            run["hook"].close()
        if run["plain"] is not None:
            run["plain"].close()
        shutil.rmtree(run["out"], ignore_errors=True)
    return results


def written(run: dict[str, Any]) -> int:
    hook = run["hook"]
    if run["plain"] is not None:
        return int(run["plain"].bytes_written)
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


def file_creation_microseconds(root: str, count: int = 200) -> float:
    """Microseconds to create (and close) one empty file in a new directory under ``root``."""
    target = tempfile.mkdtemp(dir=root)
    started = time.perf_counter()
    for index in range(count):
        os.close(os.open(os.path.join(target, str(index)), os.O_WRONLY | os.O_CREAT, 0o644))
    seconds = time.perf_counter() - started
    shutil.rmtree(target, ignore_errors=True)
    return 1e6 * seconds / count


def report(title: str, repeats: list[dict[str, Any]], show_targets: bool) -> None:
    """One line per configuration: medians over the repeats (and the range of the ratio)."""
    ratios: dict[str, list[float]] = {}
    for results in repeats:
        base = results[CONFIGS[0]]["steps_per_second"]
        for name, entry in results.items():
            ratios.setdefault(name, []).append(entry["steps_per_second"] / base)
    several = len(repeats) > 1
    print(f"\n{title}")
    spread = f" {'range':>11s}" if several else ""
    print(
        f"{'configuration':40s} {'steps/s':>8s} {'ratio':>6s}{spread} {'target':>6s} "
        f"{'MB written':>11s} {'CPU ms/step: training':>21s} {'others':>6s}"
    )
    for name in ratios:
        entries = [results[name] for results in repeats]
        speed = statistics.median(entry["steps_per_second"] for entry in entries)
        ratio = statistics.median(ratios[name])
        target = f"{TARGETS[name]:.2f}" if show_targets and name in TARGETS else ""
        between = f" {min(ratios[name]):.3f}-{max(ratios[name]):.3f}" if several else ""
        megabytes = statistics.median(entry["bytes"] for entry in entries) / 1e6
        training = statistics.median(entry["train_cpu_ms"] for entry in entries)
        others = statistics.median(entry["other_cpu_ms"] for entry in entries)
        extra = ""
        if "hook_ms_per_step" in entries[0]:
            hook_ms = statistics.median(entry["hook_ms_per_step"] for entry in entries)
            blocked = statistics.median(entry["blocked_seconds"] for entry in entries)
            extra = f"  (hook {hook_ms:.2f} ms/step, waited on writer {blocked:.2f} s)"
        print(
            f"{name:40s} {speed:8.1f} {ratio:6.3f}{between} {target:>6s} {megabytes:11.1f} "
            f"{training:21.2f} {others:6.2f}{extra}"
        )


def report_part(repeats: list[dict[str, Any]], part: str, without: str, target: float) -> None:
    """A part's cost (the non-finite guard's, the training record's): the default hook's step
    time less the same hook's without the part (configuration ``without``), as a share of the
    no-hook step time, three ways: wall clock and training-thread CPU (both noisy: a difference
    of two noisy times), and the time spent inside the hook's entry points, which the hook
    measures itself (where the part's work is done)."""
    wall, cpu, inside = [], [], []
    for results in repeats:
        base, whole, less = results[CONFIGS[0]], results[CONFIGS[1]], results[without]
        step = 1 / base["steps_per_second"]
        wall.append((1 / whole["steps_per_second"] - 1 / less["steps_per_second"]) / step)
        cpu.append((whole["train_cpu_ms"] - less["train_cpu_ms"]) / base["train_cpu_ms"])
        hook_ms = whole["hook_ms_per_step"] - less["hook_ms_per_step"]
        inside.append(hook_ms / (1e3 * step))
    print(
        f"{part}: {100 * statistics.median(inside):+.2f} % of the no-hook step time "
        f"(time inside the hook), {100 * statistics.median(wall):+.2f} % (wall clock), "
        f"{100 * statistics.median(cpu):+.2f} % (training-thread CPU time); "
        f"target at most {100 * target:.0f} %"
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
    parser.add_argument("--repeat", type=int, default=1, help="whole interleaved runs to make")
    parser.add_argument("--dir", default=None, help="where to write (default: the temp dir)")
    parser.add_argument("--framework", choices=["trainprobe", "smdebug"], default="trainprobe")
    parser.add_argument("--json", action="store_true", help="print the results as JSON only")
    parser.add_argument("--no-smdebug", action="store_true", help="skip smdebug's hook")
    args = parser.parse_args()
    chunk = min(args.chunk, args.steps)
    repeat = max(1, args.repeat)
    root = tempfile.mkdtemp(prefix="hook-overhead-", dir=args.dir)
    plain = args.framework == "trainprobe"
    try:
        repeats = [
            measure(args.framework, args.steps, args.warmup, chunk, root, plain)
            for _ in range(repeat)
        ]
        if args.json:
            print(json.dumps(repeats))
            return
        title = f"trainprobe ({args.steps} steps each, interleaved"
        title += f", median of {repeat} runs)" if repeat > 1 else ")"
        report(title, repeats, show_targets=True)
        print()
        report_part(repeats, "non-finite guard", NO_GUARD, GUARD_TARGET)
        report_part(repeats, "training record", NO_RECORD, RECORD_TARGET)
        last = repeats[-1][CONFIGS[-1]]
        plain_seconds = plain_write_seconds(last["bytes"], last["steps"], root)
        hook_rate = last["bytes"] / last["seconds"] / 1e6
        plain_rate = last["bytes"] / plain_seconds / 1e6 if plain_seconds > 0 else float("inf")
        print(
            f"\nraw every step: the hook wrote {hook_rate:.0f} MB/s while training; a plain "
            f"sequential write of the same bytes runs at {plain_rate:.0f} MB/s "
            f"({hook_rate / plain_rate:.2f} of it)"
        )
        print(
            f"creating a file in {os.path.dirname(root)} takes "
            f"{file_creation_microseconds(root):.0f} us (each saved step creates three)"
        )
        if args.no_smdebug:
            return
        python = smdebug_python()
        if python is None:
            print("\nsmdebug: reference environment not found (.cache/smdebug); skipped")
            return
        command = [str(python), __file__, "--framework", "smdebug", "--json"]
        command += ["--steps", str(args.steps), "--warmup", str(args.warmup)]
        # Inside this run's directory: smdebug writes its end marker at exit, after the
        # subprocess has removed its own directory, and this one is removed afterwards.
        command += ["--chunk", str(chunk), "--repeat", str(repeat), "--dir", root]
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
