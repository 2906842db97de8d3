"""How long the profiler report of a long, large job takes to build, how much memory it needs,
and how big the page is.

The job is synthesized in the real formats by trainprobe's own writers
(tests/report/synthetic_job.py): by default 8 hours of one host's system metrics at 500 ms with
32 cores and 8 GPUs (about 5.4 million readings, 600 MB), and 100 000 training steps in the
framework timeline. ProfilerReport's 11 rules then run over it once, as they would have during
the job, so the report has their findings (their time is printed too, for information).

Measured, in a fresh process (``python -m trainprobe.report``): the wall time, the peak memory
(max RSS) and the size of profiler-report.html. Targets: under 30 s, under 1 GiB, under 20 MB.
The same run measures two baselines on the same files, since absolute times on a shared machine
mean little: reading every byte of the profiler output (the I/O floor), and parsing every
system-metrics line with ``json.loads`` (what a naive report would start with). With Chromium
installed it also times opening the page headless until every plot is drawn. Asserts nothing::

    python benchmarks/report.py                     # the full-size job (several minutes)
    python benchmarks/report.py --hours 0.5 --steps 5000 --cores 8     # a quick run
    python benchmarks/report.py --keep runs/report-job   # keep (and reuse) the synthesized job
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

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "report")]

from synthetic_job import write_synthetic_job  # noqa: E402

TARGET_SECONDS = 30.0
TARGET_BYTES = 1 << 30
TARGET_PAGE_BYTES = 20_000_000


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO / "src")}


_MEASURED = """
import atexit, resource, runpy, sys
atexit.register(lambda: print("maxrss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                              resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                              file=sys.stderr))
kind, target, *rest = sys.argv[1:]
sys.argv = [target, *rest]
if kind == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(compile(target, "<baseline>", "exec"), {"__name__": "__main__"})
"""


def _timed(arguments: list[str], *, statuses: tuple[int, ...] = (0,)) -> tuple[float, int]:
    """Run ``python ARGUMENTS`` (``-m module ...`` or ``-c code ...``), which must exit with one
    of ``statuses``; its wall seconds and its peak memory in bytes: the max RSS of the process
    plus that of the largest process it started (the report parses in helper processes)."""
    started = time.perf_counter()
    finished = subprocess.run(
        [sys.executable, "-c", _MEASURED, *arguments],
        env=_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seconds = time.perf_counter() - started
    if finished.returncode not in statuses:
        raise SystemExit(f"{arguments} exited with {finished.returncode}: {finished.stderr}")
    [own, children] = [
        line.split()[1:] for line in finished.stderr.splitlines() if line.startswith("maxrss")
    ][-1]
    return seconds, (int(own) + int(children)) * 1024


_READ_ALL = """
import os, sys
total = 0
for root, _, names in os.walk(sys.argv[1]):
    for name in names:
        with open(os.path.join(root, name), "rb") as file:
            total += len(file.read())
"""

_PARSE_ALL = """
import json, os, sys
for root, _, names in os.walk(os.path.join(sys.argv[1], "system")):
    for name in names:
        with open(os.path.join(root, name), "rb") as file:
            rows = [json.loads(line) for line in file]
"""


def _synthesize(job_dir: Path, arguments: argparse.Namespace) -> None:
    if (job_dir / "profiler-output").is_dir():
        print(f"reusing the job at {job_dir}")
        return
    print("synthesizing the job...", flush=True)
    started = time.perf_counter()
    job = write_synthetic_job(
        job_dir,
        seconds=arguments.hours * 3600,
        interval_ms=arguments.interval_ms,
        gpus=arguments.gpus,
        cores=arguments.cores,
        steps=arguments.steps,
        outlier_every=997,
    )
    print(
        f"  {job.samples:,} samples, {job.steps:,} steps in {time.perf_counter() - started:.0f} s"
    )
    print("running ProfilerReport's rules over it (as during the job)...", flush=True)
    seconds, _ = _timed(
        [
            "-m",
            "trainprobe.rules.profiler_rules",
            str(job.profiler_output),
            "--rule-output",
            str(job_dir / "rule-output"),
        ],
        statuses=(0, 1),  # 1: a rule found an issue, as the synthesized outliers make StepOutlier
    )
    print(f"  rules: {seconds:.0f} s")


def _size(path: Path) -> int:
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--interval-ms", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--cores", type=int, default=32)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="synthesize into (or reuse) this directory")
    arguments = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        job_dir = arguments.keep or Path(scratch) / "job"
        _synthesize(job_dir, arguments)
        profiler_output = job_dir / "profiler-output"
        lines = sum(
            file.read_bytes().count(b"\n") for file in (profiler_output / "system").rglob("*.json")
        )
        print(f"profiler output: {_size(profiler_output) / 1e6:,.0f} MB, {lines:,} system lines")

        read_s, _ = _timed(["-c", _READ_ALL, str(profiler_output)])
        parse_s, _ = _timed(["-c", _PARSE_ALL, str(profiler_output)])
        report_s, peak = _timed(["-m", "trainprobe.report", str(job_dir)])
        html = next((job_dir / "rule-output").glob("*/profiler-output/profiler-report.html"))
        page_bytes = html.stat().st_size
        content = json.loads(html.with_suffix(".json").read_text())
        rules = len(content["Rules"]["Rules"])

        print()
        print(f"report:       {report_s:6.1f} s   (target < {TARGET_SECONDS:.0f} s)")
        print(f"peak memory:  {peak / 2**20:6.0f} MiB (target < 1024 MiB)")
        print(f"page:         {page_bytes / 1e6:6.1f} MB  (target < 20 MB), {rules} rules")
        print(f"baselines:    reading every byte {read_s:.1f} s; ", end="")
        print(f"json.loads of every line {parse_s:.1f} s")
        print(
            f"ratios:       report / reading = {report_s / read_s:.1f}x; "
            f"report / naive parse = {report_s / parse_s:.2f}x"
        )
        _browser(html)


def _browser(html: Path) -> None:
    try:
        from browser import chromium_path, open_page

        chromium_path()
    except (ImportError, RuntimeError) as error:
        print(f"browser:      not measured ({error})")
        return
    started = time.perf_counter()
    visit = open_page(html, html.with_suffix(".png"), timeout_ms=300_000)
    seconds = time.perf_counter() - started
    print(
        f"browser:      {seconds:.1f} s to open and draw {visit.plots_drawn} of {visit.plots} "
        f"plots; {len(visit.console_errors) + len(visit.page_errors)} errors"
    )


if __name__ == "__main__":
    main()
