"""What the flight recorder costs a training while armed, and what one capture costs.

The training is the MLP of ``hook_overhead.py`` (784-1024-1024-10, batch 256, SGD, one CPU
thread), fed by a DataLoader of whole batches, with the framework profiler recording its step
timeline. Two configurations run interleaved, a chunk of steps each in turn (which goes first
alternates), so that drifts in the machine's speed hit both alike:

- the timeline with the flight recorder disarmed (``TRAINPROBE_FLIGHT_RECORDER=no``);
- the timeline with the flight recorder armed, never triggered (the MLP's steps are steady).

It prints steps/s, the median step and the CPU time per step of both and their ratios, and the
armed recorder's own time per step, timed around each of its calls (the timing included, so an
upper bound; the mean, and the median call), as a share of the median step: the least noisy
figure (target: at most 0.5 %).

Then it asks the recorder for one capture of 2 steps (as ``trainprobe profile`` does) and plants
one stalled step (a 0.3 s data wait) to trigger a slow-step capture (2 steps and one ordinary
step), and prints each capture's trace sizes and the time the profiled steps took beyond the
median (torch.profiler running, then writing its trace at the next step start). Nothing is
asserted.

    python benchmarks/flight_recorder.py [--steps 200] [--warmup 10] [--chunk 20]
    python benchmarks/flight_recorder.py --steps 40     # quick smoke run
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TARGET = 0.005
STALLED_STEP = 45
STALL_SECONDS = 0.3


def main() -> None:
    from cpu_mlp import MlpTraining, interleaved_arguments

    args = interleaved_arguments(__doc__.splitlines()[0])
    sys.path.insert(0, str(REPO / "src"))
    from trainprobe.capture.pytorch.profiling import FrameworkProfiler
    from trainprobe.config.profiler_config import ProfilingPlan
    from trainprobe.storage.flight_captures import list_captures, write_profile_request

    training = MlpTraining()
    model, run_steps = training.model, training.run_steps
    root = Path(tempfile.mkdtemp(prefix="flight-recorder-"))

    def profiler(armed: bool, out: Path) -> FrameworkProfiler:
        os.environ["TRAINPROBE_FLIGHT_RECORDER"] = "yes" if armed else "no"
        made = FrameworkProfiler(ProfilingPlan(), out, "0-bench", profile_after_close=False)
        made.register_module(model)
        return made

    seconds = {"disarmed": 0.0, "armed": 0.0}
    cpu = {"disarmed": 0.0, "armed": 0.0}
    step_times: dict[str, list[float]] = {"disarmed": [], "armed": []}
    recorder_calls: list[float] = []
    triggered, measured = 0, 0
    try:
        run_steps(args.warmup)
        warming = profiler(True, root / "warmup")
        run_steps(args.warmup)
        warming.close()
        chunk = min(args.chunk, args.steps)
        for index in range(max(1, args.steps // chunk)):
            order = ("disarmed", "armed") if index % 2 == 0 else ("armed", "disarmed")
            for name in order:
                timed = profiler(name == "armed", root / name)
                recorder = timed.flight_recorder
                if recorder is not None:
                    original = recorder.step_started

                    def step_started(*call: Any, _original: Any = original, **named: Any) -> None:
                        began = time.perf_counter()
                        _original(*call, **named)
                        recorder_calls.append(time.perf_counter() - began)

                    recorder.step_started = step_started  # type: ignore[method-assign]
                started, cpu_started = time.perf_counter(), time.process_time()
                step_times[name] += run_steps(chunk)
                timed.close()
                seconds[name] += time.perf_counter() - started
                cpu[name] += time.process_time() - cpu_started
                triggered += len(recorder.captures) if recorder is not None else 0
            measured += chunk

        median = statistics.median(step_times["disarmed"])
        print(f"MLP 784-1024-1024-10, batch 256, 1 CPU thread; {measured} steps each, interleaved")
        print(f"{'':28s} {'disarmed':>12s} {'armed':>12s} {'ratio':>6s}")
        off, on = measured / seconds["disarmed"], measured / seconds["armed"]
        print(f"{'steps/s':28s} {off:12.2f} {on:12.2f} {on / off:6.3f}")
        armed_median = statistics.median(step_times["armed"])
        print(
            f"{'median step (ms)':28s} {median * 1e3:12.2f} {armed_median * 1e3:12.2f} "
            f"{median / armed_median:6.3f}"
        )
        print(
            f"{'CPU time per step (ms)':28s} {cpu['disarmed'] / measured * 1e3:12.2f} "
            f"{cpu['armed'] / measured * 1e3:12.2f} {cpu['disarmed'] / cpu['armed']:6.3f}"
        )
        own = statistics.fmean(recorder_calls)
        print(
            f"\narmed, never triggered ({triggered} captures): {own * 1e6:.2f} us per step inside "
            f"the recorder (median call {statistics.median(recorder_calls) * 1e6:.2f} us), "
            f"{own / median:.3%} of a median step (target: at most {TARGET:.1%})"
        )

        out = root / "captures"
        capturing = profiler(True, out)
        recorder = capturing.flight_recorder
        assert recorder is not None
        recorder.request_interval_us = 0.0

        def plant(step: int) -> None:
            if step == 20:
                write_profile_request(str(out), 2, requested_by="the benchmark")
            if step == STALLED_STEP:
                time.sleep(STALL_SECONDS)

        times = run_steps(60, plant)
        capturing.close()
        captured_median = statistics.median(times)
        for capture in list_captures(str(out)):
            first = capture.steps[0].step
            profiled = len(capture.steps) + (1 if capture.comparison is not None else 0)
            # The profiled steps, and the next one: it starts by writing the last trace.
            spent = sum(times[first : first + profiled + 1])
            if first <= STALLED_STEP <= first + profiled:
                spent -= STALL_SECONDS  # the planted stall is not the profiler's
            sizes = [
                (out / capture.folder / name).stat().st_size / 1e6
                for name in (capture.trace, capture.comparison_trace)
                if name is not None
            ]
            print(
                f"\n{capture.trigger} capture at step {capture.trigger_step}: steps "
                f"{[step.step for step in capture.steps]}"
                + (f" and comparison step {capture.comparison.step}" if capture.comparison else "")
                + f"; traces {' + '.join(f'{size:.2f}' for size in sizes)} MB; it added "
                f"{(spent - (profiled + 1) * captured_median) * 1e3:.0f} ms to those "
                f"{profiled + 1} steps ({spent / ((profiled + 1) * captured_median):.1f} x their "
                "median time)"
            )
    finally:
        os.environ.pop("TRAINPROBE_FLIGHT_RECORDER", None)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
