"""profiler-report.html in real headless Chromium: it opens from disk with the network cut off,
logs no error, draws every plot, and shows each section. The screenshot is kept in
.cache/test-artifacts/ for a person to look at."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_job import write_synthetic_job

from browser import open_page
from trainprobe.report import build_report

ARTIFACTS = Path(__file__).resolve().parents[2] / ".cache" / "test-artifacts"


@pytest.mark.slow
def test_the_report_opens_offline_and_draws_every_plot(tmp_path: Path) -> None:
    # 1 500 samples: more than the 1 000 the GPU rules wait for before they judge
    job = write_synthetic_job(
        tmp_path / "job", seconds=300, interval_ms=200, gpus=4, outlier_every=15
    )
    report = build_report(job.job_dir)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "profiler-report.png"

    visit = open_page(Path(report.html), screenshot)

    assert visit.console_errors == []
    assert visit.page_errors == []
    assert visit.network_requests == []
    # job; 6 system plots, per-GPU boxes, cores; steps and histogram; phases; LowGPUUtilization,
    # GPUMemoryIncrease and LoadBalancing
    assert visit.plots == 15
    assert visit.plots_drawn == visit.plots_with_traces == visit.plots
    assert visit.title == "Profiler report: job"
    for heading in (
        "Training job summary",
        "System usage",
        "Step durations",
        "Framework summary",
        "Rules",
        "Debugger overhead",
    ):
        assert heading in visit.text
    assert "StepOutlier" in visit.text and "LowGPUUtilization" in visit.text
    assert screenshot.stat().st_size > 50_000
