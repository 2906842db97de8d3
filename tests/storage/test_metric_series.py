"""read_metric_series gives the same readings as the SystemMetricsReader, as columns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from trainprobe.storage.metric_series import read_metric_series
from trainprobe.storage.system_metrics import MetricKey, SystemMetricsReader, SystemMetricsWriter

T0 = 1_795_300_000.0


def write_minutes(out: Path, node: str = "algo-1", samples: int = 300) -> None:
    writer = SystemMetricsWriter(str(out), node, publish_seconds=0.0)
    for sample in range(samples):
        writer.write(
            T0 + sample * 0.5,
            [
                (MetricKey("cpu", "cpu_total", "CPUUtilization"), float(sample % 97)),
                (MetricKey("gpu", "gpu0", "GPUUtilization"), 100.0 - sample % 50),
                (MetricKey("memory", "MemoryUsedPercent", ""), 35.5),
            ],
        )
    writer.close()


def as_columns(out: Path) -> dict[tuple[str, MetricKey], tuple[list[float], list[float]]]:
    columns: dict[tuple[str, MetricKey], tuple[list[float], list[float]]] = {}
    for event in SystemMetricsReader(str(out)).events(0, 1e12):
        key = (event.node_id, MetricKey(event.type, event.name, event.dimension))
        times, values = columns.setdefault(key, ([], []))
        times.append(event.timestamp)
        values.append(event.value)
    return columns


def test_every_reading_of_every_host_and_minute_as_columns(tmp_path: Path) -> None:
    write_minutes(tmp_path, "algo-1")
    write_minutes(tmp_path, "algo-2", samples=150)
    series = read_metric_series(str(tmp_path))
    expected = as_columns(tmp_path)
    assert {(s.node_id, s.key) for s in series} == set(expected)
    for found in series:
        times, values = expected[(found.node_id, found.key)]
        np.testing.assert_array_equal(found.timestamps, times)
        np.testing.assert_array_equal(found.values, values)
    assert sum(s.values.size for s in series) == 3 * (300 + 150)


def test_lines_of_another_layout_are_read_and_garbage_is_skipped(tmp_path: Path) -> None:
    write_minutes(tmp_path, samples=10)
    [minute] = list((tmp_path / "system").rglob("*.json"))
    other_order = {
        "Timestamp": T0 + 5.25,
        "Value": 7,
        "NodeId": "algo-1",
        "Dimension": "GPUUtilization",
        "Name": "gpu0",
        "Type": "gpu",
    }
    spaced = {
        "Type": "gpu",
        "Name": "gpu0",
        "Dimension": "GPUUtilization",
        "Value": 8.5,
        "NodeId": "algo-1",
        "Timestamp": T0 + 5.5,
    }  # json.dumps's default separators
    with minute.open("ab") as file:
        file.write(json.dumps(other_order).encode() + b"\n" + b"not a reading\n")
        file.write(json.dumps(spaced).encode() + b"\n")
    series = {s.key.name: s for s in read_metric_series(str(tmp_path))}
    gpu = series["gpu0"]
    assert gpu.values.size == 12
    assert gpu.timestamps[-2:].tolist() == [T0 + 5.25, T0 + 5.5]
    assert gpu.values[-2:].tolist() == [7.0, 8.5]
    assert series["cpu_total"].values.size == 10


def test_the_minute_being_written_is_read_too(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=0.0)
    writer.write(T0, [(MetricKey("cpu", "cpu_total", "CPUUtilization"), 12.5)])
    assert list((tmp_path / "system").rglob("*.partial"))
    [series] = read_metric_series(str(tmp_path))
    assert series.values.tolist() == [12.5]
    assert read_metric_series(str(tmp_path / "nothing-here")) == []


def test_a_long_job_parsed_by_several_processes_reads_the_same(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=0.0)
    for minute in range(40):  # more minutes than PARALLEL_FROM_MINUTES
        for second in (0, 30):
            at = T0 + minute * 60 + second
            writer.write(at, [(MetricKey("gpu", "gpu0", "GPUUtilization"), float(minute))])
    writer.close()
    alone = read_metric_series(str(tmp_path), processes=1)
    together = read_metric_series(str(tmp_path), processes=2)
    assert [s.key for s in together] == [s.key for s in alone]
    for mine, theirs in zip(together, alone, strict=True):
        np.testing.assert_array_equal(mine.timestamps, theirs.timestamps)
        np.testing.assert_array_equal(mine.values, theirs.values)
    assert together[0].values.size == 80
