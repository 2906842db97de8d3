"""CPUBottleneck, IOBottleneck and OverallSystemUsage on the system metrics of real runs.

The system monitor runs as the job runner runs it (its own process, 100 ms sampling) while a real
training with a CPU-heavy DataLoader saturates this machine's cores; the rules follow the job live,
in one-second windows. A stand-in pynvml shows the monitor a GPU at a set utilization (idle: the
GPU waits; busy: it does not), or no GPU, whatever GPUs this machine has. Its disks show next to
no I/O wait, even for direct reads, so IOBottleneck reads synthesized metrics. Algorithms:
reference/smdebug.md §5.3.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_profiler_data import (
    definition,
    end_job,
    evaluate,
    fake_gpus,
    follow,
    host,
    monitored,
    report_of,
    train,
    write_system,
)

from trainprobe.rules.verdict import ISSUES_FOUND, NO_ISSUES_FOUND

# They judge how busy the machine's cores were: by themselves (scripts/test).
pytestmark = pytest.mark.alone

WINDOW = 1_000_000  # one-second windows


def bottleneck_run(tmp_path: Path, gpu_utilization: int) -> Path:
    """A training whose two data loader workers keep both cores busy, watched by the monitor
    (seeing one GPU at ``gpu_utilization`` %) and followed by CPUBottleneck; the job, ended."""
    out = tmp_path / "profiler-output"
    nvml = fake_gpus(tmp_path / "nvml", utilization=gpu_utilization)
    # A busy core counts above 70 % here (the default is 90 %): on a shared 2-core machine the
    # monitor, the rules and the test itself take their share of each core.
    rule = definition(
        "CPUBottleneck", patience=10, scan_interval_us=WINDOW, cpu_threshold=70, threshold=30
    )
    with monitored(out, nvml) as monitor:
        following = follow([rule], tmp_path)
        train(out, 30, num_workers=2, item_cost=0.03)
        monitor.wait_for_samples(30)
    end_job(out)
    [verdict] = following.result()
    tmp_path.joinpath("status").write_text(verdict.status)
    return tmp_path


@pytest.mark.slow
def test_cpu_bottleneck_fires_when_a_cpu_heavy_data_loader_keeps_the_gpu_waiting(
    tmp_path: Path,
) -> None:
    job = bottleneck_run(tmp_path, gpu_utilization=2)

    assert (job / "status").read_text() == ISSUES_FOUND
    report = report_of(job, "CPUBottleneck")
    details = report["Details"]
    assert report["Violations"] == details["bottlenecks"] > 10
    assert details["percent"] > 30
    assert report["RuleTriggered"] >= 1
    assert details["datapoints"] == details["datapoints_with_gpu"] == report["Datapoints"]
    # The framework events around the bottleneck samples: the steps of the training.
    assert details["framework_during_bottlenecks"]["steps"] > 0
    assert "the CPU is the bottleneck" in report["Recommendation"]
    assert "Increase num_workers of your DataLoader" in report["Recommendation"]


@pytest.mark.slow
def test_cpu_bottleneck_is_quiet_when_the_gpu_is_busy_however_busy_the_cpu(
    tmp_path: Path,
) -> None:
    job = bottleneck_run(tmp_path, gpu_utilization=95)

    assert (job / "status").read_text() == NO_ISSUES_FOUND
    report = report_of(job, "CPUBottleneck")
    assert report["Violations"] == 0 and report["RuleTriggered"] == 0
    assert report["Datapoints"] > 10
    assert "no CPU bottleneck" in report["Recommendation"]


def test_cpu_bottleneck_on_a_host_without_gpu_says_there_is_no_gpu_to_wait(
    tmp_path: Path,
) -> None:
    out = tmp_path / "profiler-output"
    # A stand-in pynvml that sees no GPU, whatever this machine has.
    with monitored(out, fake_gpus(tmp_path / "nvml", utilization=0, count=0)) as monitor:
        monitor.wait_for_samples(15)
    end_job(out)

    [verdict] = evaluate(
        [definition("CPUBottleneck", patience=5, scan_interval_us=WINDOW)], tmp_path
    )

    assert verdict.status == NO_ISSUES_FOUND
    report = report_of(tmp_path, "CPUBottleneck")
    assert report["Details"]["datapoints_with_gpu"] == 0
    assert report["Recommendation"].startswith("No GPU utilization was recorded")


@pytest.mark.parametrize(
    ("iowait", "gpu", "fires"),
    [(70.0, 3.0, True), (70.0, 90.0, False), (5.0, 3.0, False)],
    ids=["GPU idle while waiting for I/O", "GPU busy", "little I/O wait"],
)
def test_io_bottleneck_fires_when_the_gpu_idles_while_the_cpu_waits_for_io(
    tmp_path: Path, iowait: float, gpu: float, fires: bool
) -> None:
    out = tmp_path / "profiler-output"
    # Four samples in five wait for I/O: 80 % of the time, above the threshold of 50 %.
    samples = [
        host(cpu=20.0, iowait=iowait if i % 5 else 0.0, gpus=[(gpu, 30.0)]) for i in range(60)
    ]
    write_system(out, samples)
    end_job(out)

    [verdict] = evaluate(
        [definition("IOBottleneck", patience=20, scan_interval_us=WINDOW)], tmp_path
    )

    report = report_of(tmp_path, "IOBottleneck")
    assert verdict.status == (ISSUES_FOUND if fires else NO_ISSUES_FOUND)
    assert report["Details"]["percent"] == pytest.approx(80.0 if fires else 0.0)
    if fires:
        assert "reading data is the bottleneck" in report["Recommendation"]
        # Judged from the first window with more than 20 samples: 3 s in, then every second.
        assert report["RuleTriggered"] == 4


@pytest.mark.slow
def test_overall_system_usage_summarises_the_measured_readings_and_never_fires(
    tmp_path: Path,
) -> None:
    out = tmp_path / "profiler-output"
    with monitored(out) as monitor:
        train(out, 10, item_cost=0.02)
        monitor.wait_for_samples(15)
    end_job(out)

    [verdict] = evaluate([definition("OverallSystemUsage", scan_interval_us=WINDOW)], tmp_path)

    assert verdict.status == NO_ISSUES_FOUND
    report = report_of(tmp_path, "OverallSystemUsage")
    usage = report["Details"]["nodes"]["algo-1"]
    rows = [
        json.loads(line)
        for path in sorted(out.glob("system/incremental/*/*.json"))
        for line in path.read_text().splitlines()
    ]
    cpu = [
        r["Value"] for r in rows if r["Name"] == "cpu_total" and r["Dimension"] == "CPUUtilization"
    ]
    memory = [r["Value"] for r in rows if r["Name"] == "MemoryUsedPercent"]
    assert usage["CPU"]["count"] == len(cpu) == report["Datapoints"]
    assert usage["CPU"]["p50"] == pytest.approx(np.percentile(cpu, 50))
    assert usage["CPU"]["p95"] == pytest.approx(np.percentile(cpu, 95))
    assert usage["CPU"]["max"] == pytest.approx(max(cpu))
    assert usage["Memory"]["p99"] == pytest.approx(np.percentile(memory, 99))
    assert usage["CPU"]["unit"] == "%"
    assert report["RuleTriggered"] == 0
    assert report["Recommendation"].startswith("algo-1: CPU p50")
