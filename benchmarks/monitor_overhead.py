"""What the system monitor costs: its own CPU time over wall time, as a percentage of one core.

Side by side, over the same wall-clock window (after a warm-up), it measures:

- the monitor sampling every ``--interval-ms`` (100 by default), watching a sleeping process;
- the same at SageMaker's default, 500 ms;
- the same monitor with monitoring turned off in its ProfilerConfig file: it still wakes every
  half second to poll the file and the process, but samples nothing;
- a Python process that imports the monitor and sleeps: the floor.

Each is a real ``python -m trainprobe.capture.system_monitor`` process (or the sleeper); its CPU
time (user + system) is read with psutil at both ends of the window. The target is under 1 % of
one core at 100 ms. Prints the figures and ratios; asserts nothing::

    python benchmarks/monitor_overhead.py [--seconds 60] [--interval-ms 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from trainprobe.storage.system_metrics import SystemMetricsReader  # noqa: E402

TARGET_PERCENT = 1.0
WARM_UP_SECONDS = 3.0


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window (default 60)")
    parser.add_argument("--interval-ms", type=int, default=100, help="sampling interval (100)")
    arguments = parser.parse_args()

    environment = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    python = sys.executable
    monitor = [python, "-m", "trainprobe.capture.system_monitor"]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        config = root / "profiler_config.json"
        config.write_text(json.dumps({"DisableProfiler": True}))
        watched = subprocess.Popen([python, "-c", "import time; time.sleep(10**6)"])
        runs = {
            f"monitor at {arguments.interval_ms} ms": [
                *monitor,
                *("--out", str(root / "fast"), "--interval-ms", str(arguments.interval_ms)),
                *("--pid", str(watched.pid)),
            ],
            "monitor at 500 ms": [
                *monitor,
                *(
                    "--out",
                    str(root / "default"),
                    "--interval-ms",
                    "500",
                    "--pid",
                    str(watched.pid),
                ),
            ],
            "monitor turned off": [
                *monitor,
                *("--out", str(root / "off"), "--config", str(config), "--pid", str(watched.pid)),
            ],
            "python sleeping": [
                python,
                "-c",
                "import time, trainprobe.capture.system_monitor; time.sleep(10**6)",
            ],
        }
        processes = {
            name: subprocess.Popen(command, env=environment, stderr=subprocess.DEVNULL)
            for name, command in runs.items()
        }
        try:
            time.sleep(WARM_UP_SECONDS)
            handles = {name: psutil.Process(process.pid) for name, process in processes.items()}
            started_wall, started = time.time(), time.monotonic()
            before = {name: cpu_seconds(handle) for name, handle in handles.items()}
            time.sleep(arguments.seconds)
            after = {name: cpu_seconds(handle) for name, handle in handles.items()}
            wall = time.monotonic() - started
            ended_wall = time.time()
        finally:
            for process in [*processes.values(), watched]:
                process.terminate()
            for process in [*processes.values(), watched]:
                process.wait()

        outputs = {"monitor at 500 ms": root / "default", "monitor turned off": root / "off"}
        outputs[f"monitor at {arguments.interval_ms} ms"] = root / "fast"
        print(f"window: {wall:.1f} s of wall time, after {WARM_UP_SECONDS:.0f} s of warm-up")
        print(f"{'':24} {'CPU s':>8} {'% of a core':>12} {'samples':>8} {'µs/sample':>10}")
        percent = {}
        for name in runs:
            used = after[name] - before[name]
            percent[name] = used / wall * 100
            count = 0
            if name in outputs:
                events = SystemMetricsReader(str(outputs[name])).events(started_wall, ended_wall)
                count = len({event.timestamp for event in events})
            per_sample = f"{used / count * 1e6:10.0f}" if count else f"{'-':>10}"
            print(f"{name:24} {used:8.3f} {percent[name]:11.3f}% {count:8d} {per_sample}")

        fast = percent[f"monitor at {arguments.interval_ms} ms"]
        floor = percent["python sleeping"]
        print(
            f"monitor at {arguments.interval_ms} ms / {TARGET_PERCENT:g} % target: "
            f"{fast / TARGET_PERCENT:.2f}"
        )
        for name in ("monitor turned off", "python sleeping"):
            if percent[name] > 0:
                print(
                    f"monitor at {arguments.interval_ms} ms / {name}: {fast / percent[name]:.1f}x"
                )
            else:
                print(
                    f"monitor at {arguments.interval_ms} ms / {name}: - ({name} used less CPU "
                    "than the clock shows, 10 ms)"
                )
        print(
            f"monitor at {arguments.interval_ms} ms minus python sleeping: {fast - floor:.3f} "
            "% of a core"
        )


if __name__ == "__main__":
    main()
