"""The GPU rules on GPU metrics synthesized in the real format (this machine has no GPU).

LowGPUUtilization, GPUMemoryIncrease, LoadBalancing and BatchSize, each on data where it fires
and data where it does not. The algorithms and defaults are reference/smdebug.md §5.3; the
expected figures are recomputed here from the readings, by the formulas given there. Patience and
windows are small so that a few seconds of readings are enough.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_profiler_data import definition, end_job, evaluate, host, report_of, write_system

from trainprobe.rules.verdict import ISSUES_FOUND, NO_ISSUES_FOUND

SCAN = 2_000_000  # 2 s windows over readings every 0.1 s: 20 samples a window


def job_with(tmp_path: Path, samples: list[list[tuple[str, str, str, float]]]) -> Path:
    write_system(tmp_path / "profiler-output", samples)
    end_job(tmp_path / "profiler-output")
    return tmp_path


def test_low_gpu_utilization_finds_underused_and_fluctuating_gpus(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    # The files keep two decimals: the figures below are computed from what they hold.
    underused = [round(20.0 + rng.uniform(-5, 5), 2) for _ in range(100)]  # p95 about 25 %
    fluctuating = [95.0 if i % 3 else 2.0 for i in range(100)]  # p95 95 %, p5 2 %
    busy = [round(90.0 + rng.uniform(-5, 5), 2) for _ in range(100)]
    samples = [
        host(gpus=[(u, 30.0), (f, 30.0), (b, 30.0)])
        for u, f, b in zip(underused, fluctuating, busy, strict=True)
    ]
    job = job_with(tmp_path, samples)
    rule = definition("LowGPUUtilization", patience=20, window=50, scan_interval_us=SCAN)

    [verdict] = evaluate([rule], job)

    assert verdict.status == ISSUES_FOUND
    report = report_of(job, "LowGPUUtilization")
    gpus = report["Details"]["gpus"]["algo-1"]
    assert {name: gpus[name]["status"] for name in gpus} == {
        "gpu0": "underused",
        "gpu1": "fluctuating",
        "gpu2": "fine",
    }
    assert gpus["gpu0"]["p95"] == pytest.approx(np.percentile(underused[-50:], 95))
    assert gpus["gpu1"]["p5"] == pytest.approx(np.percentile(fluctuating[-50:], 5))
    assert report["RuleTriggered"] == verdict.steps_evaluated - 1  # all but the first window
    assert report["Datapoints"] == 300
    assert "gpu0 on algo-1 was underused" in report["Recommendation"]


def test_low_gpu_utilization_is_quiet_for_busy_gpus(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    samples = [host(gpus=[(85 + rng.uniform(-10, 10), 40.0)] * 2) for _ in range(100)]
    job = job_with(tmp_path, samples)

    [verdict] = evaluate(
        [definition("LowGPUUtilization", patience=20, window=50, scan_interval_us=SCAN)], job
    )

    assert verdict.status == NO_ISSUES_FOUND
    report = report_of(job, "LowGPUUtilization")
    assert report["RuleTriggered"] == 0 and report["Violations"] == 0
    assert report["Recommendation"] == "Every GPU was well used in the newest readings."


def smdebug_memory_increases(values: list[float], window: int, patience: int) -> list[float]:
    """The increases the rule compares with its threshold, reading by reading (§5.3)."""
    found = []
    for count in range(1, len(values) + 1):
        seen = np.asarray(values[:count])
        if count > patience and count >= window + 2:
            found.append(seen[-window:].mean() - seen[-window - 1 : -2].mean())
    return found


def test_gpu_memory_increase_fires_when_memory_use_jumps(tmp_path: Path) -> None:
    memory = [30.0] * 60 + [90.0] * 40  # the batch doubled, or a leak let go of nothing
    job = job_with(tmp_path, [host(gpus=[(80.0, m)]) for m in memory])

    [verdict] = evaluate(
        [definition("GPUMemoryIncrease", patience=20, window=10, scan_interval_us=SCAN)], job
    )

    assert verdict.status == ISSUES_FOUND
    report = report_of(job, "GPUMemoryIncrease")
    increases = smdebug_memory_increases(memory, window=10, patience=20)
    assert report["Violations"] == sum(1 for grown in increases if grown > 5)
    assert report["Details"]["gpus"]["algo-1"]["gpu0"]["largest_increase"] == pytest.approx(
        max(increases)
    )
    assert report["RuleTriggered"] == 1  # the window of the jump
    assert "memory leak" in report["Recommendation"]


def test_gpu_memory_increase_is_quiet_for_steady_memory_use(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    memory = [round(v, 2) for v in 40 + rng.uniform(-2, 2, 100)]
    job = job_with(tmp_path, [host(gpus=[(80.0, m)]) for m in memory])

    [verdict] = evaluate(
        [definition("GPUMemoryIncrease", patience=20, window=10, scan_interval_us=SCAN)], job
    )

    assert verdict.status == NO_ISSUES_FOUND
    assert report_of(job, "GPUMemoryIncrease")["Violations"] == 0


def js_distance(first: list[float], second: list[float]) -> float:
    """Jensen-Shannon distance of two utilization series' histograms (50 bins over 0-100 %)."""
    p = np.histogram(first, bins=50, range=(0, 100))[0] / len(first)
    q = np.histogram(second, bins=50, range=(0, 100))[0] / len(second)
    m = (p + q) / 2

    def kl(a: np.ndarray, b: np.ndarray) -> float:
        return float(sum(x * np.log(x / y) for x, y in zip(a, b, strict=True) if x > 0))

    return float(np.sqrt((kl(p, m) + kl(q, m)) / 2))


def test_load_balancing_fires_when_one_gpu_does_the_work(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    busy = [round(v, 2) for v in rng.uniform(80, 100, 100)]
    idle = [round(v, 2) for v in rng.uniform(0, 20, 100)]
    job = job_with(
        tmp_path, [host(gpus=[(b, 50.0), (i, 10.0)]) for b, i in zip(busy, idle, strict=True)]
    )

    [verdict] = evaluate([definition("LoadBalancing", patience=20, scan_interval_us=SCAN)], job)

    assert verdict.status == ISSUES_FOUND
    report = report_of(job, "LoadBalancing")
    distance = report["Details"]["distances"]["algo-1"]["gpu0-gpu1"]
    assert distance == pytest.approx(js_distance(busy, idle))
    assert distance > 0.5
    assert "used unevenly" in report["Recommendation"]


def test_load_balancing_is_quiet_when_the_gpus_share_the_work(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    first = [round(v, 2) for v in rng.normal(80, 5, 100)]
    second = [round(v, 2) for v in rng.normal(80, 5, 100)]
    job = job_with(
        tmp_path, [host(gpus=[(a, 50.0), (b, 50.0)]) for a, b in zip(first, second, strict=True)]
    )

    [verdict] = evaluate([definition("LoadBalancing", patience=20, scan_interval_us=SCAN)], job)

    assert verdict.status == NO_ISSUES_FOUND
    report = report_of(job, "LoadBalancing")
    distance = report["Details"]["distances"]["algo-1"]["gpu0-gpu1"]
    assert distance == pytest.approx(js_distance(first, second))
    assert distance < 0.5


def test_batch_size_fires_when_cpu_gpu_and_gpu_memory_are_all_lightly_used(
    tmp_path: Path,
) -> None:
    job = job_with(tmp_path, [host(cpu=15.0, gpus=[(30.0, 20.0)]) for _ in range(100)])

    [verdict] = evaluate(
        [definition("BatchSize", patience=20, window=30, scan_interval_us=SCAN)], job
    )

    assert verdict.status == ISSUES_FOUND
    report = report_of(job, "BatchSize")
    assert report["Details"]["underused_gpus"] == {
        "algo-1/gpu0": {"cpu_p95": 15.0, "gpu_p95": 30.0, "gpu_memory_p95": 20.0}
    }
    assert "batch size may be too small" in report["Recommendation"]


@pytest.mark.parametrize(
    ("cpu", "gpu", "memory"),
    [(15.0, 90.0, 20.0), (15.0, 30.0, 85.0), (80.0, 30.0, 20.0)],
    ids=["busy GPU", "full GPU memory", "busy CPU"],
)
def test_batch_size_is_quiet_when_something_is_well_used(
    tmp_path: Path, cpu: float, gpu: float, memory: float
) -> None:
    job = job_with(tmp_path, [host(cpu=cpu, gpus=[(gpu, memory)]) for _ in range(100)])

    [verdict] = evaluate(
        [definition("BatchSize", patience=20, window=30, scan_interval_us=SCAN)], job
    )

    assert verdict.status == NO_ISSUES_FOUND
    assert report_of(job, "BatchSize")["Violations"] == 0


def test_gpu_rules_without_gpus_say_so_and_find_nothing(tmp_path: Path) -> None:
    job = job_with(tmp_path, [host(cpu=50.0) for _ in range(50)])
    rules = ["LowGPUUtilization", "GPUMemoryIncrease", "LoadBalancing", "BatchSize"]

    definitions = [definition(name, patience=5, scan_interval_us=SCAN) for name in rules]

    verdicts = evaluate(definitions, job)

    assert [verdict.status for verdict in verdicts] == [NO_ISSUES_FOUND] * 4
    for name in rules:
        assert "GPU" in report_of(job, name)["Recommendation"]
