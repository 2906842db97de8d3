"""What the framework profiler's step timeline costs a training, next to the same training without.

The training is an MLP 784-1024-1024-10, batch 256, SGD, on one CPU thread, fed by a DataLoader
(whole batches, no workers, so loading costs next to nothing and the wrapped ``next`` is what is
measured). The same model runs in chunks of steps, with and without a ``FrameworkProfiler``
recording the timeline only (framework profiling on, no detailed / data loader / Python range),
alternating chunk by chunk (which goes first alternates too), so drifts in the machine's speed hit
both alike. For each chunk with the profiler, a new profiler is created before the chunk (not
timed) and closed after it; the timed part is the chunk's steps and then ``close()``, which waits
for the writer thread to encode and write every event of the chunk, so all the profiler's work is
paid for. Both ways are warmed up first. The script prints steps/s of both (steps and
``close()``) and their ratio (target: under 1 % slower, a ratio of 0.99 or more), the ratio of the
median step times, the ratio of the CPU time the process spent per step (this process's own
work, all threads: what a machine shared with other jobs measures best), the time the
profiler's hooks took per step (``FrameworkProfiler.spent_seconds``, immune to other jobs), the
CPU cost per step in microseconds, and the timeline's size per step. Nothing is asserted.

    python benchmarks/timeline_overhead.py [--steps 200] [--warmup 10] [--chunk 20]
    python benchmarks/timeline_overhead.py --steps 40     # quick smoke run
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = 0.99


def main() -> None:
    from cpu_mlp import MlpTraining, interleaved_arguments

    args = interleaved_arguments(__doc__.splitlines()[0])
    sys.path.insert(0, str(REPO / "src"))
    from trainprobe.capture.pytorch.profiling import FrameworkProfiler
    from trainprobe.config.profiler_config import ProfilingPlan
    from trainprobe.storage.trace_file import TraceFileReader

    training = MlpTraining()
    model, run_steps = training.model, training.run_steps
    root = Path(tempfile.mkdtemp(prefix="timeline-overhead-"))

    seconds = {"off": 0.0, "on": 0.0}
    cpu_seconds = {"off": 0.0, "on": 0.0}
    hook_seconds = 0.0
    step_times: dict[str, list[float]] = {"off": [], "on": []}
    measured = 0
    try:
        # Warm up both ways: the first profiled steps pay one-off costs (torch's lazy imports).
        run_steps(args.warmup)
        warming = FrameworkProfiler(ProfilingPlan(), root / "warmup", "0-bench")
        warming.register_module(model)
        run_steps(args.warmup)
        warming.close()
        shutil.rmtree(root / "warmup")
        chunk = min(args.chunk, args.steps)
        for index in range(max(1, args.steps // chunk)):
            order = ("off", "on") if index % 2 == 0 else ("on", "off")
            for name in order:
                profiler = None
                if name == "on":
                    profiler = FrameworkProfiler(ProfilingPlan(), root, "0-bench")
                    profiler.register_module(model)
                started, cpu_started = time.perf_counter(), time.process_time()
                step_times[name] += run_steps(chunk)
                if profiler is not None:
                    profiler.close()
                    hook_seconds += profiler.spent_seconds
                seconds[name] += time.perf_counter() - started
                cpu_seconds[name] += time.process_time() - cpu_started
            measured += chunk
        events = TraceFileReader(str(root)).events()
        size = sum(path.stat().st_size for path in root.rglob("*.json"))
    finally:
        shutil.rmtree(root, ignore_errors=True)

    off = measured / seconds["off"]
    on = measured / seconds["on"]
    median_off = statistics.median(step_times["off"])
    median_on = statistics.median(step_times["on"])
    print(f"MLP 784-1024-1024-10, batch 256, 1 CPU thread; {measured} steps each, interleaved")
    print(f"{'':28s} {'no profiler':>12s} {'timeline':>12s} {'ratio':>6s}")
    print(f"{'steps/s (steps and close)':28s} {off:12.2f} {on:12.2f} {on / off:6.3f}")
    print(
        f"{'median step (ms)':28s} {median_off * 1e3:12.2f} {median_on * 1e3:12.2f} "
        f"{median_off / median_on:6.3f}"
    )
    print(
        f"{'CPU time per step (ms)':28s} {cpu_seconds['off'] / measured * 1e3:12.2f} "
        f"{cpu_seconds['on'] / measured * 1e3:12.2f} {cpu_seconds['off'] / cpu_seconds['on']:6.3f}"
    )
    print(f"target: a ratio of {TARGET} or more (under 1 % slower)")
    cost_us = (cpu_seconds["on"] - cpu_seconds["off"]) / measured * 1e6
    own_us = hook_seconds / measured * 1e6
    print(
        f"\nprofiler cost: {own_us:.0f} us per step inside its hooks, measured by the profiler "
        f"({own_us / (median_off * 1e6):.2%} of a median step);\nby CPU time, about "
        f"{cost_us:.0f} us per step including its writer thread and close() (noise: +-2 %)"
    )
    print(f"timeline: {len(events) / measured:.1f} events, {size / measured:.0f} bytes per step")


if __name__ == "__main__":
    main()
