"""StepOutlier, MaxInitializationTime, Dataloader and OverallFrameworkMetrics on real trainings.

A real PyTorch training runs with the FrameworkProfiler writing its step timeline and data loader
events, the real system monitor samples the host (the Dataloader rule counts its cores), and the
rules follow the job live in one-second windows. Algorithms: reference/smdebug.md §5.3.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
from test_profiler_data import definition, end_job, follow, monitored, report_of, train

from trainprobe.rules.profiler_rules.step_outlier import LEAST_STEPS
from trainprobe.rules.verdict import ISSUES_FOUND, NO_ISSUES_FOUND
from trainprobe.storage.system_metrics import SystemMetricsReader
from trainprobe.storage.trace_file import TraceFileReader

# Real trainings, judged by how busy the machine was: by themselves (scripts/test).
pytestmark = [pytest.mark.slow, pytest.mark.alone]

WINDOW = 1_000_000  # one-second windows


def step_durations(out: Path) -> list[float]:
    """The durations (s) of the steps the timeline holds."""
    events = TraceFileReader(str(out)).events()
    return [e.duration_us / 1e6 for e in events if e.phase == "Step:ModeKeys.TRAIN"]


def test_step_outlier_fires_when_some_steps_sleep(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    rule = definition("StepOutlier", n_outliers=3, scan_interval_us=WINDOW)
    slow = [20, 40, 60, 80, 100]
    with monitored(out):
        following = follow([rule], tmp_path)
        train(out, LEAST_STEPS + 10, step_pause=0.01, slow_steps=slow, slow_pause=0.4)
    end_job(out)
    [verdict] = following.result()

    assert verdict.status == ISSUES_FOUND
    report = report_of(tmp_path, "StepOutlier")
    [kind] = report["Details"]["steps"].values()
    durations = np.asarray(step_durations(out))
    threshold = durations.mean() + 3 * durations.std()
    assert kind["threshold_s"] == pytest.approx(threshold)
    assert kind["outliers"] == report["Violations"] == int((durations > threshold).sum())
    assert set(slow) <= {found["step"] for found in kind["outlier_steps"]}
    assert kind["step_stats_s"]["max"] == pytest.approx(durations.max())
    assert report["Datapoints"] == LEAST_STEPS + 10
    assert "took longer than" in report["Recommendation"]
    # The evidence names the mode as the training does, not the timeline's event name.
    assert verdict.first_issue is not None
    said = verdict.first_issue.evidence[0].message
    assert re.match(r"\d+ TRAIN steps on \S+ took longer than \d+\.\d{3} s$", said), said
    assert "ModeKeys" not in report["Recommendation"]


def test_step_outlier_is_quiet_for_steady_steps(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    with monitored(out):
        following = follow([definition("StepOutlier", scan_interval_us=WINDOW)], tmp_path)
        train(out, LEAST_STEPS + 10, step_pause=0.01)
    end_job(out)
    [verdict] = following.result()

    assert verdict.status == NO_ISSUES_FOUND
    report = report_of(tmp_path, "StepOutlier")
    assert report["Violations"] <= 10  # the default n_outliers
    assert report["Recommendation"].startswith("Step durations were steady")


def test_step_outlier_waits_for_enough_steps(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    with monitored(out):
        following = follow([definition("StepOutlier", n_outliers=1)], tmp_path)
        train(out, 20, slow_steps=[5, 10], slow_pause=0.3)
    end_job(out)
    [verdict] = following.result()

    assert verdict.status == NO_ISSUES_FOUND
    report = report_of(tmp_path, "StepOutlier")
    assert (
        report["Recommendation"]
        == f"20 steps so far; the rule judges step durations after {LEAST_STEPS}."
    )


def first_times(out: Path) -> tuple[float, float]:
    """The job's first reading and its first step's start, in seconds, from the files."""
    reading = SystemMetricsReader(str(out)).events(0, 1e12)[0].timestamp
    steps = [e for e in TraceFileReader(str(out)).events() if e.phase.startswith("Step:")]
    return reading, steps[0].start_us / 1e6


def test_max_initialization_time_fires_when_the_first_step_comes_late(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    threshold = 0.02  # minutes: 1.2 s
    rule = definition("MaxInitializationTime", threshold=threshold, scan_interval_us=WINDOW)
    with monitored(out):
        following = follow([rule], tmp_path)
        time.sleep(2.5)  # a slow start: downloading data, building the model
        train(out, 10)
    end_job(out)
    [verdict] = following.result()

    assert verdict.status == ISSUES_FOUND
    report = report_of(tmp_path, "MaxInitializationTime")
    first_reading, first_step = first_times(out)
    details = report["Details"]
    assert details["initialization_s"] == pytest.approx(first_step - first_reading, abs=1e-3)
    assert details["initialization_s"] > threshold * 60
    assert details["steps"] == report["Datapoints"] == 10
    # It fires in the windows that end more than 1.2 s in without a step, and no later.
    assert 1 <= report["RuleTriggered"] <= details["initialization_s"]
    assert "initialization is slow" in report["Recommendation"]


def test_max_initialization_time_is_quiet_when_training_starts_in_time(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    rule = definition("MaxInitializationTime", threshold=1, scan_interval_us=WINDOW)
    with monitored(out):
        following = follow([rule], tmp_path)
        train(out, 10)
    end_job(out)
    [verdict] = following.result()

    assert verdict.status == NO_ISSUES_FOUND
    details = report_of(tmp_path, "MaxInitializationTime")["Details"]
    first_reading, first_step = first_times(out)
    assert details["initialization_s"] == pytest.approx(first_step - first_reading, abs=1e-3)
    assert details["training_s"] > 0 and details["finalization_s"] >= 0


def test_max_initialization_time_without_framework_profiling_does_not_judge(
    tmp_path: Path,
) -> None:
    out = tmp_path / "profiler-output"
    rule = definition("MaxInitializationTime", threshold=0.01, scan_interval_us=WINDOW)
    with monitored(out) as monitor:
        following = follow([rule], tmp_path, framework_profiling=False)
        monitor.wait_for_samples(20)
    end_job(out)
    [verdict] = following.result()

    assert verdict.status == NO_ISSUES_FOUND
    assert (
        "enable framework profiling"
        in report_of(tmp_path, "MaxInitializationTime")["Recommendation"]
    )


@pytest.mark.parametrize(
    ("per_core", "status", "words"),
    [
        (0, ISSUES_FOUND, "increase num_workers of your DataLoader"),
        (1, NO_ISSUES_FOUND, "a good number"),
        (4, ISSUES_FOUND, "Decrease num_workers of your DataLoader"),
    ],
    ids=["no workers", "one worker per core", "four workers per core"],
)
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_dataloader_compares_the_loaders_running_with_the_cores(
    tmp_path: Path, per_core: int, status: str, words: str
) -> None:
    # 70 % (the default) to 100 % of the cores should load data in parallel: on a loaded machine
    # not every one of many workers is busy in every second, so the upper bound is kept tight.
    cores = os.cpu_count() or 1
    workers = per_core * cores
    out = tmp_path / "profiler-output"
    rule = definition("Dataloader", patience=1, max_threshold=100, scan_interval_us=WINDOW)
    # About 2.5 s of loading, most of it with every worker busy, whatever the cores: a batch
    # holds two items per core (four on two cores), and the batches are a whole number of
    # rounds of the workers (on 16 cores, 60 batches would leave 12 of 16 busy at the end).
    batch_size = 2 * cores if workers else 4
    steps = workers * math.ceil(60 / workers) if workers else 60
    with monitored(out):
        following = follow([rule], tmp_path)
        train(
            out,
            steps,
            num_workers=workers,
            item_cost=0.02 if workers else 0.005,
            batch_size=batch_size,
        )
    end_job(out)
    [verdict] = following.result()

    report = report_of(tmp_path, "Dataloader")
    [node] = report["Details"]["nodes"].values()
    assert node["cores"] == cores
    assert report["Details"]["settings"]["0-algo-1"]["num_workers"] == workers
    assert verdict.status == status, report
    assert words in report["Recommendation"]
    assert f"(it is {workers})" in report["Recommendation"] or status == NO_ISSUES_FOUND
    if workers == 0:
        assert node["median_parallel"] == 1
    assert report["Details"]["batch_wait_s"]["count"] == steps


def test_overall_framework_metrics_splits_the_step_time_and_never_fires(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    with monitored(out):
        following = follow(
            [definition("OverallFrameworkMetrics", scan_interval_us=WINDOW)], tmp_path
        )
        train(out, 30, step_pause=0.02)
    end_job(out)
    [verdict] = following.result()

    assert verdict.status == NO_ISSUES_FOUND
    report = report_of(tmp_path, "OverallFrameworkMetrics")
    events = TraceFileReader(str(out)).events()
    details = report["Details"]
    assert details["events"] == len(events) == report["Datapoints"]
    assert details["steps"] == 30
    split = details["step_split"]

    def total_us(phase: str) -> float:
        return sum(e.duration_us for e in events if e.phase == phase)

    # Nothing nests in a plain step: each phase keeps its events' whole time. The data loader
    # profiling's DataLoaderIter is the DataLoading wait again: it is not counted twice.
    for phase in ("Forward", "Backward(post-forward)", "Optimizer", "DataLoading"):
        assert split[phase]["time_us"] == pytest.approx(total_us(phase)), phase
    assert total_us("DataLoaderIter") == pytest.approx(total_us("DataLoading"))
    assert "DataLoaderIter" not in split
    # The whole is the steps and the waits for their batches, which sit between them.
    whole = details["split_time_us"]
    assert whole >= total_us("Step:ModeKeys.TRAIN") + total_us("DataLoading")
    forward = split["Forward"]
    assert forward["percent_of_step_time"] == pytest.approx(forward["time_us"] / whole * 100)
    assert sum(entry["percent_of_step_time"] for entry in split.values()) <= 100
    assert details["top_events"][0]["phase"] == "Forward"  # the 20 ms sleep of each step
    phases = details["job_phases_s"]
    assert phases["initialization"] > 0 and phases["training"] > 0.02 * 30
    assert report["Recommendation"].startswith("30 steps; of the step time: Forward")
