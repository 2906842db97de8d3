"""What ``trainprobe ui`` costs on a long job: the first chart, the bytes sent, the points drawn,
how soon a new step shows, and the server's CPU while a job runs and while idle.

The job is synthesized in the real formats by the hook's own writer thread (``WriterThread``),
which also keeps the scalars it writes as chunks beside the step files: by default 100 000 TRAIN
steps of 50 scalars (a loss and 49 metrics), one of them spiking to 1e6 at one step, and a job
store record for it, in progress. ``trainprobe ui`` runs as a user starts it
(a subprocess on 127.0.0.1); the script talks to it over HTTP with the token's cookie.

Measured:

- first chart: the scalars of the job, beside the baseline measured in the same run: reading
  every scalar value through a fresh trial, which is what a reader of an output without chunks
  (smdebug's) must do; measured last, after the UI's figures. Twice cold, each time from a
  server just started: the first look at the job ever (from the writer's chunks; only the steps
  after them read from the step files, and those kept beside the job store), then after a
  restart of the server. Then warm
  (nothing new on disk). Bytes sent, and the points per chart (each bucket's mean, min and
  max), and whether the spike survived the bucketing. With Chromium installed, the job page's
  first chart in a headless browser too. Target: first chart < 1 s.
- update: a new step is written while an event stream of the job is open; the time until the
  event carrying it arrives (the median of several). Target: < 1 s.
- CPU: the server's CPU time over ``--seconds`` idle (no page open), then with one job page's
  event stream open while a step is written every 0.2 s and the page's chart request follows
  each event. Target idle: < 1 % of a core.

Asserts nothing::

    python benchmarks/ui.py                         # the issue's size (minutes to write)
    python benchmarks/ui.py --steps 5000 --seconds 5   # a quick run
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests" / "ui")]

from job_records import job_in_progress  # noqa: E402

from trainprobe.capture.writer_thread import (  # noqa: E402
    CollectionsJob,
    EndStep,
    ScalarBatch,
    WriterThread,
)
from trainprobe.jobs.store import JobStore  # noqa: E402
from trainprobe.storage.modes import ModeKeys  # noqa: E402

JOB = "ui-benchmark"
SPIKE = 1e6


class Training:
    """The job's writer: the hook's writer thread (``WriterThread``), as a training has it, so
    that the job's files, its scalar chunks among them, are what a hooked training leaves."""

    def __init__(self, debug_output: str, scalars: int) -> None:
        self.writer = WriterThread(debug_output, "worker_0")
        self.names = ["CrossEntropyLoss_output_0", *(f"metric-{i}" for i in range(1, scalars))]
        self.base = np.linspace(2.0, 1.0, scalars, dtype=np.float64)
        collections = {
            "losses": {"include_regex": ["Loss_output"], "tensor_names": [], "save_config": None},
            "metrics": {"include_regex": ["^metric-"], "tensor_names": [], "save_config": None},
        }
        self.writer.submit(CollectionsJob(collections, 1))

    def write(self, first: int, last: int, spike_at: int = -1) -> None:
        """Steps ``first`` to ``last - 1``, on disk when this returns."""
        dtypes = ["float32"] * len(self.names)
        for step in range(first, last):
            values = self.base / (1.0 + step / 1000.0)
            if step == spike_at:
                values = values.copy()
                values[0] = SPIKE
            mode = ModeKeys.TRAIN
            self.writer.submit(
                ScalarBatch(step, self.names, dtypes, values, mode, step, time.time())
            )
            self.writer.submit(EndStep(step))
        self.writer.flush()


def synthesize(home: Path, steps: int, scalars: int) -> tuple[str, Training]:
    """The job's files and its store record; its debug output's path and its writer."""
    job_dir = home / "out" / JOB
    debug_output = str(job_dir / "debug-output")
    training = Training(debug_output, scalars)
    training.write(0, steps, spike_at=steps // 3)
    JobStore(home / "jobs.sqlite").insert(job_in_progress(JOB, job_dir))
    return debug_output, training


def read_every_value(debug_output: str) -> int:
    """The baseline: every scalar value of every step, through a fresh trial."""
    from trainprobe.analysis.trial import create_trial

    trial = create_trial(debug_output, timeout=0)
    count = 0
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        for step in tensor.steps():
            tensor.value(step)
            count += 1
    return count


class Ui:
    """``trainprobe ui`` in a subprocess, and requests to it."""

    def __init__(self, home: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trainprobe.cli.main", "ui", "--port", "0", "--no-browser"],
            env={**os.environ, "TRAINPROBE_HOME": str(home), "PYTHONPATH": str(REPO / "src")},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", line)
        assert found, line
        self.url = found[0]
        self.port, self.token = int(found[1]), found[2]
        self.headers = {
            "Host": f"127.0.0.1:{self.port}",
            "Cookie": f"trainprobe-ui-{self.port}={self.token}",
        }

    def get(self, path: str) -> tuple[float, bytes]:
        """Seconds and body of one GET."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        started = time.perf_counter()
        connection.request("GET", path, headers=self.headers)
        body = connection.getresponse().read()
        seconds = time.perf_counter() - started
        connection.close()
        return seconds, body

    def events(
        self, path: str, seen: list[tuple[float, dict[str, Any]]], stop: threading.Event
    ) -> None:
        """Read the event stream at ``path`` into ``seen`` (arrival time, data) until ``stop``."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        connection.request("GET", path, headers=self.headers)
        response = connection.getresponse()
        while not stop.is_set():
            line = response.readline()
            if not line:
                return
            if line.startswith(b"data: "):
                seen.append((time.perf_counter(), json.loads(line[6:])))
        connection.close()

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.process.pid).cpu_times()
        return float(times.user + times.system)

    def close(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=30)


def first_chart_in_chromium(ui: Ui) -> float | None:
    """Seconds from opening the job page to its first chart drawn (as the page's clock says),
    or None without Chromium."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None
    sys.path.insert(0, str(REPO / "tests"))
    from playwright.sync_api import sync_playwright

    from browser import CHROMIUM_FLAGS

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page()
        page.goto(ui.url)  # sets the cookie
        page.wait_for_selector("#jobs")
        page.goto(f"http://127.0.0.1:{ui.port}/jobs/{JOB}")
        chart = page.wait_for_selector("#scalar-0[data-drawn]", timeout=600_000)
        assert chart is not None
        seconds = int(chart.get_attribute("data-drawn-at") or 0) / 1000  # the page's own clock
        browser.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--scalars", type=int, default=50)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0, help="each CPU measurement")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        home = Path(directory)
        started = time.perf_counter()
        debug_output, training = synthesize(home, args.steps, args.scalars)
        print(
            f"job: {args.steps} steps x {args.scalars} scalars, written in "
            f"{time.perf_counter() - started:.1f} s"
        )

        ui = Ui(home)
        try:
            first, body = ui.get(f"/api/jobs/{JOB}/scalars")
            print(f"first chart, first look at the job ever (HTTP, cold): {first:.2f} s")
            ui.close()
            ui = Ui(home)
            cold, body = ui.get(f"/api/jobs/{JOB}/scalars")
            charts = json.loads(body)
            points = [3 * len(series["x"]) for chart in charts for series in chart["series"]]
            spike = max(charts[0]["series"][0]["max"]) == SPIKE
            print(
                f"first chart, server restarted (HTTP, cold): {cold:.2f} s; "
                f"{len(body) / 1e6:.2f} MB for {len(charts)} charts"
            )
            print(
                f"points per chart: at most {max(points)} (mean, min and max of "
                f"{max(points) // 3} buckets) for {args.steps} steps; spike kept: {spike}"
            )
            warm, body = ui.get(f"/api/jobs/{JOB}/scalars")
            print(f"charts again (warm): {warm:.3f} s, {len(body) / 1e6:.2f} MB")
            zoom, body = ui.get(f"/api/jobs/{JOB}/scalars?from=1000&to=2000")
            print(f"zoom to 1000 steps (re-bucketed): {zoom:.3f} s, {len(body) / 1e6:.2f} MB")
            browser = first_chart_in_chromium(ui)
            if browser is not None:
                print(f"first chart in Chromium (server warm): {browser:.2f} s")

            seen: list[tuple[float, dict[str, Any]]] = []
            stop = threading.Event()
            reader = threading.Thread(
                target=ui.events, args=(f"/api/events/jobs/{JOB}", seen, stop), daemon=True
            )
            reader.start()
            while not seen:
                time.sleep(0.05)
            delays = []
            step = args.steps
            for _ in range(args.updates):
                time.sleep(0.37)  # not in step with the server's looks
                written = time.perf_counter()
                training.write(step, step + 1)
                while not any(data.get("step") == step for _, data in seen):
                    time.sleep(0.005)
                arrived = next(at for at, data in seen if data.get("step") == step)
                delays.append(arrived - written)
                step += 1
            print(
                f"update: a new step shows {statistics.median(delays):.2f} s after its files "
                f"(median of {len(delays)}; max {max(delays):.2f} s)"
            )
            stop.set()

            # An open stream's own looks are part of "running"; the idle server has none.
            before = ui.cpu_seconds()
            time.sleep(args.seconds)
            idle = (ui.cpu_seconds() - before) / args.seconds
            seen.clear()
            stop = threading.Event()
            reader = threading.Thread(
                target=ui.events, args=(f"/api/events/jobs/{JOB}", seen, stop), daemon=True
            )
            reader.start()
            before = ui.cpu_seconds()
            deadline = time.monotonic() + args.seconds
            shown = 0
            while time.monotonic() < deadline:
                training.write(step, step + 1)
                step += 1
                if len(seen) > shown:
                    shown = len(seen)
                    ui.get(f"/api/jobs/{JOB}/scalars")
                time.sleep(0.2)
            running = (ui.cpu_seconds() - before) / args.seconds
            stop.set()
            print(
                f"server CPU: idle {100 * idle:.2f} % of a core; with a running job's page "
                f"open {100 * running:.1f} % of a core"
            )
        finally:
            ui.close()
            training.writer.close()

        # Last, so that its minutes of reading leave the UI's figures alone.
        started = time.perf_counter()
        values = read_every_value(debug_output)
        baseline = time.perf_counter() - started
        print(
            f"baseline: every value through a fresh trial ({values}): {baseline:.2f} s; "
            f"first look {first / baseline:.4f} x baseline, restarted {cold / baseline:.4f}"
        )


if __name__ == "__main__":
    main()
