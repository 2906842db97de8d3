"""System-metrics files: smdebug's names and JSON lines, how minutes appear, and the reader.

File names and the line schema come from reference/smdebug.md §5.1 and SageMaker's own files (the
smdebug test traces); smdebug 1.0.34 itself reads what the writer leaves (reference environment).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from reference_envs import run_reference
from trainprobe.config.errors import ConfigError
from trainprobe.storage.system_metrics import (
    MetricKey,
    SystemMetric,
    SystemMetricsReader,
    SystemMetricsWriter,
    check_node_id,
)

MINUTE = 1591160640  # 2020-06-03 05:04:00 UTC, the start of a minute
KEYS = ["Type", "Name", "Dimension", "Value", "NodeId", "Timestamp"]
CPU0 = MetricKey("cpu", "cpu0", "CPUUtilization")
MEMORY = MetricKey("memory", "MemoryUsedPercent", "")
USED = MetricKey("host", "MemoryUsedBytes", "")
# smdebug's test for a system-metrics path (smdebug.profiler.utils.validate_system_profiler_file).
SMDEBUG_FILE = re.compile(r".+/system/.+/(\d{10}).algo-\d+.json")


def hour_dir(minute: int) -> str:
    return datetime.fromtimestamp(minute, timezone.utc).strftime("%Y%m%d%H")


def tree(out: Path) -> list[str]:
    return sorted(str(path.relative_to(out)) for path in out.rglob("*") if path.is_file())


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_each_minute_is_one_file_named_as_smdebug_expects(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(str(tmp_path), "algo-2")
    for second in (1.5, 59.9, 60.0, 3 * 3600 + 7):
        writer.write(MINUTE + second, [(CPU0, 50.0)])
    writer.close()

    expected = [
        f"system/incremental/{hour_dir(minute)}/{minute:010d}.algo-2.json"
        for minute in (MINUTE, MINUTE + 60, MINUTE + 3 * 3600)
    ]
    assert tree(tmp_path) == sorted(expected)
    assert all(SMDEBUG_FILE.match(str(tmp_path / name)) for name in expected)
    assert [len(lines(tmp_path / name)) for name in expected] == [2, 1, 1]


def test_a_line_is_one_reading_with_sagemakers_keys_in_sagemakers_order(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(str(tmp_path), "algo-1")
    writer.write(MINUTE + 1.25, [(CPU0, 4.7612), (USED, 1234567890123), (MEMORY, float("nan"))])
    writer.close()

    [path] = tmp_path.rglob("*.json")
    rows = lines(path)
    assert all(list(row) == KEYS for row in rows)
    assert rows == [
        {
            "Type": "cpu",
            "Name": "cpu0",
            "Dimension": "CPUUtilization",
            "Value": 4.76,
            "NodeId": "algo-1",
            "Timestamp": MINUTE + 1.25,
        },
        {
            "Type": "host",
            "Name": "MemoryUsedBytes",
            "Dimension": "",
            "Value": 1234567890123,
            "NodeId": "algo-1",
            "Timestamp": MINUTE + 1.25,
        },
    ]


def test_the_current_minute_is_partial_until_it_ends(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=0)
    hour = f"system/incremental/{hour_dir(MINUTE)}"
    writer.write(MINUTE + 10, [(CPU0, 1.0)])
    assert tree(tmp_path) == [f"{hour}/{MINUTE}.algo-1.partial"]

    writer.write(MINUTE + 70, [(CPU0, 2.0)])
    assert tree(tmp_path) == [
        f"{hour}/{MINUTE}.algo-1.json",
        f"{hour}/{MINUTE + 60}.algo-1.partial",
    ]

    writer.close()
    assert tree(tmp_path) == [f"{hour}/{MINUTE}.algo-1.json", f"{hour}/{MINUTE + 60}.algo-1.json"]


def test_the_partial_minute_is_published_at_a_bounded_cadence(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=3600)
    writer.write(MINUTE + 1, [(CPU0, 1.0)])  # the first sample appears at once
    [partial] = tmp_path.rglob("*.partial")
    assert len(lines(partial)) == 1

    writer.write(MINUTE + 2, [(CPU0, 2.0)])
    assert len(lines(partial)) == 1  # not yet: within publish_seconds

    writer.flush()
    assert len(lines(partial)) == 2


def test_smdebug_reads_the_finished_minutes_and_not_the_partial_one(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=0)
    for second in range(0, 120, 10):
        writer.write(MINUTE + second + 0.5, [(CPU0, float(second)), (MEMORY, 12.5)])
    # The first minute is finished; the second is still being written.
    assert len(list(tmp_path.rglob("*.partial"))) == 1

    events = run_reference(
        "smdebug",
        f"""
        import json
        from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader
        reader = LocalSystemMetricsReader({str(tmp_path)!r})
        events = reader.get_events(0, 10**16)
        print(json.dumps([[e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp]
                          for e in events]))
        """,
    )
    ours = SystemMetricsReader(str(tmp_path)).events(MINUTE, MINUTE + 60)
    assert len(ours) == 12
    assert [SystemMetric(*event) for event in events] == ours  # type: ignore[misc]


def test_the_reader_reads_files_sagemaker_wrote(tmp_path: Path) -> None:
    # Two lines in the shape of SageMaker's files (smdebug's test traces), in a minute of theirs.
    folder = tmp_path / "system" / "incremental" / "2020060500"
    folder.mkdir(parents=True)
    (folder / "1591160699.algo-1.json").write_text(
        '{"Type": "cpu", "Name":"cpu0", "Dimension": "CPUUtilization", "Value":4.76,'
        '"NodeId":"algo-1","Timestamp":1591160699.4570894}\n'
        '{"Type": "gpu", "Name":"gpu1", "Dimension": "GPUUtilization", "Value":14.76,'
        '"NodeId":"algo-1","Timestamp":1591160719.6570894}'  # the last line has no newline
    )
    reader = SystemMetricsReader(str(tmp_path))

    assert reader.events(1591160699, 1591160720) == [
        SystemMetric("cpu", "cpu0", "CPUUtilization", 4.76, "algo-1", 1591160699.4570894),
        SystemMetric("gpu", "gpu1", "GPUUtilization", 14.76, "algo-1", 1591160719.6570894),
    ]
    assert reader.last_timestamp() == 1591160719.6570894


def test_time_ranges_are_half_open_in_seconds_or_microseconds(tmp_path: Path) -> None:
    for node in ("algo-1", "algo-2"):
        writer = SystemMetricsWriter(str(tmp_path), node)
        for second in (5, 10, 15, 65):
            writer.write(MINUTE + second, [(CPU0, float(second))])
        writer.close()
    reader = SystemMetricsReader(str(tmp_path))

    in_seconds = reader.events(MINUTE + 10, MINUTE + 65)
    assert [(event.value, event.node_id) for event in in_seconds] == [
        (10.0, "algo-1"),
        (10.0, "algo-2"),
        (15.0, "algo-1"),
        (15.0, "algo-2"),
    ]
    assert reader.events((MINUTE + 10) * 10**6, (MINUTE + 65) * 10**6, "microseconds") == in_seconds
    assert [event.value for event in reader.events(MINUTE, MINUTE + 66, node_id="algo-2")] == [
        5.0,
        10.0,
        15.0,
        65.0,
    ]
    with pytest.raises(ConfigError) as raised:
        reader.events(0, 1, "second")
    assert (raised.value.field, raised.value.suggestion) == ("unit", "seconds")


def test_the_reader_follows_a_minute_as_it_grows_and_is_finished(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=0)
    reader = SystemMetricsReader(str(tmp_path))
    seen = []
    for second in range(0, 90, 3):
        writer.write(MINUTE + second, [(CPU0, float(second))])
        seen.append([event.value for event in reader.events(MINUTE, MINUTE + 120)])
    writer.close()
    seen.append([event.value for event in reader.events(MINUTE, MINUTE + 120)])

    everything = [float(second) for second in range(0, 90, 3)]
    assert seen == [everything[: count + 1] for count in range(len(everything))] + [everything]


def test_a_reader_polling_while_files_are_replaced_never_sees_a_broken_line(
    tmp_path: Path,
) -> None:
    samples = 400
    writer = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=0)
    keys = [MetricKey("cpu", f"cpu{n}", "CPUUtilization") for n in range(16)]
    done = threading.Event()
    problems: list[str] = []
    counts: list[int] = []

    def poll() -> None:
        reader = SystemMetricsReader(str(tmp_path))
        while not done.is_set():
            for path in list(tmp_path.rglob("*.json")) + list(tmp_path.rglob("*.partial")):
                try:
                    content = path.read_bytes()
                except FileNotFoundError:
                    continue  # a partial file renamed since it was listed
                if not content.endswith(b"\n"):
                    problems.append(f"{path.name} ends mid-line")
                for line in content.splitlines():
                    if list(json.loads(line)) != KEYS:
                        problems.append(f"{path.name}: {line!r}")
            counts.append(len(reader.events(MINUTE, MINUTE + 600)))

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for sample in range(samples):
            writer.write(MINUTE + sample * 0.5, [(key, sample % 100) for key in keys])
        writer.close()
    finally:
        done.set()
        poller.join()

    assert problems == []
    assert counts == sorted(counts)  # readings only ever get added
    assert all(count % len(keys) == 0 for count in counts)  # whole samples
    assert len(SystemMetricsReader(str(tmp_path)).events(MINUTE, MINUTE + 600)) == samples * 16


def test_a_restarted_writer_continues_the_minute_it_had_written(tmp_path: Path) -> None:
    first = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=0)
    first.write(MINUTE + 1, [(CPU0, 1.0)])
    first.write(MINUTE + 2, [(CPU0, 2.0)])
    first.close()
    second = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=0)
    second.write(MINUTE + 3, [(CPU0, 3.0)])
    reader = SystemMetricsReader(str(tmp_path))

    assert [event.value for event in reader.events(MINUTE, MINUTE + 60)] == [1.0, 2.0, 3.0]
    second.close()
    assert [event.value for event in reader.events(MINUTE, MINUTE + 60)] == [1.0, 2.0, 3.0]
    assert [path.name for path in tmp_path.rglob("*.*")] == [f"{MINUTE}.algo-1.json"]


def test_a_partial_minute_left_by_a_stopped_writer_is_finished_by_the_next(
    tmp_path: Path,
) -> None:
    crashed = SystemMetricsWriter(str(tmp_path), "algo-1", publish_seconds=0)
    crashed.write(MINUTE + 1, [(CPU0, 1.0)])  # never closed
    SystemMetricsWriter(str(tmp_path), "algo-1").write(MINUTE + 600, [(CPU0, 2.0)])

    names = sorted(path.name for path in tmp_path.rglob("*") if path.is_file())
    assert names == [f"{MINUTE}.algo-1.json", f"{MINUTE + 600}.algo-1.partial"]


def test_lines_that_are_not_readings_are_skipped_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "system" / "incremental" / hour_dir(MINUTE)
    folder.mkdir(parents=True)
    good = {"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 1.0}
    rows = [
        json.dumps({**good, "NodeId": "algo-1", "Timestamp": MINUTE + 1}),
        '{"Type": "cpu", "Name": "cp',
        json.dumps({"Type": "cpu", "NodeId": "algo-1", "Timestamp": MINUTE + 2}),
        json.dumps({**good, "NodeId": "algo-1", "Timestamp": MINUTE + 3}),
    ]
    (folder / f"{MINUTE}.algo-1.json").write_text("\n".join(rows) + "\n")

    with caplog.at_level(logging.WARNING):
        reader = SystemMetricsReader(str(tmp_path))
        first = reader.events(MINUTE, MINUTE + 60)
        again = SystemMetricsReader(str(tmp_path)).events(MINUTE, MINUTE + 60)
    assert [event.timestamp for event in first] == [MINUTE + 1, MINUTE + 3]
    assert again == first
    assert len([r for r in caplog.records if "2 line(s)" in r.getMessage()]) == 2  # one per reader


def test_a_host_is_named_algo_n(tmp_path: Path) -> None:
    assert check_node_id("algo-12") == "algo-12"
    for bad, suggestion in (("algo3", "algo-3"), ("worker_0", None), ("algo-0", None), (1, None)):
        with pytest.raises(ConfigError) as raised:
            SystemMetricsWriter(str(tmp_path), bad)  # type: ignore[arg-type]
        assert (raised.value.field, raised.value.value) == ("node_id", bad)
        assert raised.value.suggestion == suggestion
        assert "algo-<n>" in str(raised.value)
    assert not os.listdir(tmp_path)
