"""The profiler report's content (profiler-report.json) on synthesized jobs in the real formats.

Each figure is checked against the synthesized job (what was written) or against an independent
reading of the same files (trainprobe's SystemMetricsReader, numpy over every reading).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from synthetic_job import SyntheticJob, write_synthetic_job

from trainprobe.report import JobFiles, build_report
from trainprobe.storage.system_metrics import SystemMetricsReader


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> SyntheticJob:
    # 13 slow steps: more than the 10 that StepOutlier tolerates
    return write_synthetic_job(tmp_path_factory.mktemp("report") / "job", outlier_every=15)


@pytest.fixture(scope="module")
def content(job: SyntheticJob) -> dict[str, Any]:
    report = build_report(job.job_dir)
    data: dict[str, Any] = json.loads(Path(report.json).read_text())
    return data


def readings(job: SyntheticJob, name: str, dimension: str) -> np.ndarray:
    events = SystemMetricsReader(str(job.profiler_output)).events(0, 1e12)
    return np.array([e.value for e in events if e.name == name and e.dimension == dimension])


def test_the_report_goes_beside_the_profiler_rules_data(
    job: SyntheticJob, content: dict[str, Any]
) -> None:
    files = JobFiles.find(job.job_dir)
    assert files.rule_output is not None
    report_dir = Path(files.rule_output) / "profiler-output"
    assert (report_dir / "profiler-report.html").is_file()
    assert (report_dir / "profiler-report.json").is_file()
    assert len(list((report_dir / "profiler-reports").glob("*.json"))) == 11


def test_the_job_summary_measures_initialization_training_and_steps(
    job: SyntheticJob, content: dict[str, Any]
) -> None:
    summary = content["Job"]
    assert summary["Status"] == "Ended"
    assert summary["Steps"] == job.steps
    assert summary["InitializationSeconds"] == pytest.approx(
        job.first_step_s - job.start_s, abs=0.6
    )
    assert summary["TotalSeconds"] == pytest.approx(job.end_s - job.start_s, abs=1.0)
    assert summary["StepsPerSecond"] == pytest.approx(job.steps / summary["TrainingSeconds"])
    assert summary["GPUs"] == 2
    assert summary["Hosts"] == ["algo-1"]


def test_system_statistics_are_exact_over_every_reading(
    job: SyntheticJob, content: dict[str, Any]
) -> None:
    [host] = content["SystemUsage"]["Hosts"]
    rows = {(row["Name"], row["Dimension"]): row for row in host["Statistics"]}
    for name, dimension in [("gpu1", "GPUUtilization"), ("cpu_total", "CPUUtilization")]:
        values = readings(job, name, dimension)
        row = rows[(name, dimension)]
        assert row["count"] == job.samples == values.size
        for percent in (5, 50, 95, 99):
            assert row[f"p{percent}"] == pytest.approx(np.percentile(values, percent))
        assert (row["min"], row["max"]) == (values.min(), values.max())


def test_plotted_series_are_downsampled_but_keep_their_extremes(tmp_path: Path) -> None:
    job = write_synthetic_job(tmp_path / "long", seconds=1800, interval_ms=100, steps=3000)
    content = json.loads(Path(build_report(job.job_dir).json).read_text())
    [host] = content["SystemUsage"]["Hosts"]
    gpu_plot = next(plot for plot in host["Plots"] if plot["Title"] == "GPU utilization")
    series = gpu_plot["Series"][0]
    assert len(series["x"]) <= 1000 < job.samples
    values = readings(job, "gpu0", "GPUUtilization")
    assert max(series["max"]) == pytest.approx(values.max(), rel=1e-3)
    assert min(series["min"]) == pytest.approx(values.min(), abs=0.01)
    assert content["TimeAxis"]["Unit"] == "min"


def test_the_gpus_idle_during_the_stall_shows_in_the_plot(content: dict[str, Any]) -> None:
    [host] = content["SystemUsage"]["Hosts"]
    gpu_plot = next(plot for plot in host["Plots"] if plot["Title"] == "GPU utilization")
    means = gpu_plot["Series"][0]["mean"]
    assert min(means) < 15 and max(means) > 70
    assert [plot["Title"] for plot in host["Plots"]][:3] == ["CPU", "GPU utilization", "GPU memory"]
    assert host["CoreHeatmap"]["Cores"] == ["cpu0", "cpu1", "cpu2", "cpu3"]


def test_step_outliers_are_the_slow_steps_written(
    job: SyntheticJob, content: dict[str, Any]
) -> None:
    [process] = content["StepDurations"]["Processes"]
    assert process["Mode"] == "TRAIN"
    assert process["Steps"] == job.steps
    assert process["OutlierSteps"] == list(job.outlier_steps)
    assert sum(process["Histogram"]["Counts"]) == job.steps
    slow, normal = process["OutlierDurationsMs"][0], process["DurationMs"]["p50"]
    assert slow == pytest.approx(6 * normal, rel=0.01)


def test_the_framework_summary_splits_the_step_time(content: dict[str, Any]) -> None:
    # Of each step and the wait for its batch: 10 % waiting, 30 % forward, 45 % backward, 10 %
    # optimizer (synthetic_job.py), the shares of the whole adding up to at most 100 %.
    split = {row["Phase"]: row["PercentOfStepTime"] for row in content["Framework"]["PhaseSplit"]}
    assert split["DataLoading"] == pytest.approx(10, rel=0.02)
    assert split["Forward"] == pytest.approx(30, rel=0.02)
    assert split["Backward(post-forward)"] == pytest.approx(45, rel=0.02)
    assert split["Optimizer"] == pytest.approx(10, rel=0.02)


def test_the_rules_ran_on_the_finished_job_and_step_outlier_fired(content: dict[str, Any]) -> None:
    rules = content["Rules"]
    assert rules["Status"] == "IssuesFound"
    by_name = {row["Rule"]: row for row in rules["Rules"]}
    assert len(by_name) == 11
    assert by_name["StepOutlier"]["RuleTriggered"] > 0
    assert rules["Rules"][0]["Rule"] == "StepOutlier"  # the rules that fired come first
    assert by_name["OverallSystemUsage"]["RuleTriggered"] == 0


def test_a_job_in_progress_gets_a_report_without_running_its_rules(tmp_path: Path) -> None:
    job = write_synthetic_job(tmp_path / "live", seconds=60, steps=50)
    (job.profiler_output / "training_job_end.ts").unlink()
    report = build_report(job.profiler_output, tmp_path / "out")
    content = json.loads(Path(report.json).read_text())
    assert content["Job"]["Status"] == "InProgress"
    assert content["Job"]["FinalizationSeconds"] is None
    assert content["Rules"]["Rules"] == []
    assert not (job.job_dir / "rule-output").exists()
    assert "trainprobe rules run ProfilerReport" in Path(report.html).read_text()


def test_text_from_the_job_cannot_inject_markup(
    tmp_path: Path, job: SyntheticJob, content: dict[str, Any]
) -> None:
    files = JobFiles.find(job.job_dir)  # its rules' report data: written with ``content``
    assert files.rule_reports_dir is not None
    copy = tmp_path / "job"
    subprocess.run(["cp", "-r", str(job.job_dir), str(copy)], check=True)
    reports = Path(str(files.rule_reports_dir).replace(str(job.job_dir), str(copy)))
    data = json.loads((reports / "BatchSize.json").read_text())
    data["Recommendation"] = "<script>alert(1)</script></script>"
    (reports / "BatchSize.json").write_text(json.dumps(data))
    page = Path(build_report(copy).html).read_text()
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_command_line_writes_the_report_and_refuses_a_wrong_path(
    tmp_path: Path, job: SyntheticJob
) -> None:
    command = [sys.executable, "-m", "trainprobe.cli.main", "report"]
    done = subprocess.run(
        [*command, str(job.job_dir), "--out", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert f"report: {tmp_path / 'profiler-report.html'}" in done.stdout
    wrong = subprocess.run([*command, str(tmp_path)], capture_output=True, text=True)
    assert wrong.returncode == 2
    assert "path" in wrong.stderr and str(tmp_path) in wrong.stderr
    assert "profiler-output" in wrong.stderr
