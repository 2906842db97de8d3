"""The report's Debugger overhead section on a synthesized job with real overhead files: the
hook's own time is the share of the training, its waits for the GPU stand beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from synthetic_job import write_synthetic_job

from browser import open_page
from trainprobe.report import build_report
from trainprobe.storage.hook_overhead import (
    HookOverheadRecord,
    encode_hook_overhead,
    write_hook_overhead,
)

STEPS = list(range(200))


def write_overhead(debug_output: Path, worker: str, ms: float, wait_ms: float) -> None:
    seconds = [ms / 1000.0] * len(STEPS)
    waits = [wait_ms / 1000.0] * len(STEPS) if wait_ms else []
    total = sum(seconds)
    record = HookOverheadRecord(
        worker,
        len(STEPS),
        total,
        total / len(STEPS),
        4096,
        0.0,
        STEPS,
        seconds,
        device_wait_seconds=sum(waits),
        device_wait=waits,
    )
    write_hook_overhead(str(debug_output), encode_hook_overhead(record), worker)


def report_of(job_dir: Path) -> tuple[dict[str, Any], str]:
    """The report's content, and its Debugger overhead section as the page shows it."""
    report = build_report(job_dir)
    html = Path(report.html).read_text()
    start = html.index('id="debugger-overhead"')
    return json.loads(Path(report.json).read_text()), html[start : html.index("</section>", start)]


def test_a_gpu_jobs_hook_time_is_its_own_and_its_waits_stand_beside_it(tmp_path: Path) -> None:
    job = write_synthetic_job(tmp_path / "job", seconds=60, steps=len(STEPS), outlier_every=0)
    # worker_0 waited 7 ms a step for the GPU beside its own 3 ms; worker_1 never waited.
    write_overhead(job.job_dir / "debug-output", "worker_0", ms=3.0, wait_ms=7.0)
    write_overhead(job.job_dir / "debug-output", "worker_1", ms=2.0, wait_ms=0.0)

    content, section = report_of(job.job_dir)

    training_s = content["Job"]["TrainingSeconds"]
    waited, never = content["DebuggerOverhead"]["Workers"]
    assert waited["MeanMsPerStep"] == pytest.approx(3.0)
    assert waited["PercentOfTraining"] == pytest.approx(0.6 / training_s * 100)
    assert waited["MeanDeviceWaitMsPerStep"] == pytest.approx(7.0)
    assert waited["DeviceWaitSeconds"] == pytest.approx(1.4)
    assert waited["DeviceWaitPlot"]["mean"][0] == pytest.approx(7.0)
    assert never["MeanDeviceWaitMsPerStep"] == 0.0 and never["DeviceWaitPlot"] is None
    assert "waiting for the GPU (ms/step)" in section and "counted apart" in section
    assert "<td>7</td>" in section.replace(" ", "")  # worker_0's mean wait, in its own column


def test_a_cpu_jobs_section_has_no_gpu_waits(tmp_path: Path) -> None:
    job = write_synthetic_job(tmp_path / "job", seconds=30, steps=len(STEPS), outlier_every=0)
    write_overhead(job.job_dir / "debug-output", "worker_0", ms=1.0, wait_ms=0.0)

    content, section = report_of(job.job_dir)

    [worker] = content["DebuggerOverhead"]["Workers"]
    assert worker["MeanMsPerStep"] == pytest.approx(1.0) and worker["DeviceWaitPlot"] is None
    assert "debugger-overhead" in section and "GPU" not in section


@pytest.mark.slow
def test_the_hook_time_plot_draws_the_gpu_waits_beside_it_in_a_browser(tmp_path: Path) -> None:
    job = write_synthetic_job(tmp_path / "job", seconds=60, steps=len(STEPS), outlier_every=0)
    write_overhead(job.job_dir / "debug-output", "worker_0", ms=3.0, wait_ms=7.0)
    write_overhead(job.job_dir / "debug-output", "worker_1", ms=2.0, wait_ms=0.0)
    report = build_report(job.job_dir)

    visit = open_page(Path(report.html), tmp_path / "report.png")

    assert visit.console_errors == [] and visit.page_errors == []
    assert visit.plots_drawn == visit.plots_with_traces == visit.plots
    # The table's column, and the legend of worker_0's plot (worker_1's has one line, no legend).
    assert visit.text.count("waiting for the GPU") == 2
