"""The timeline files on disk: Chrome trace JSON, one event per line, rotated, atomic, read back.

The layout and schema are smdebug's (reference/smdebug.md §5.1): ``framework/pevents/<YYYYMMDDHH>/
<lastEventEndUs>_<node>_pythontimeline.json``, a JSON array whose ``ts`` are relative to pid 0's
``start_time_since_epoch_in_micros``, phases as fake pids; §10 asks that pid 0's metadata not be
repeated.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from timing import FakeClock
from trainprobe.config.errors import ConfigError
from trainprobe.storage.trace_file import (
    ProfilePoint,
    TraceFileReader,
    TraceFileWriter,
    check_trace_node_id,
    parse_python_stats_dir,
    parse_timeline_file_name,
    python_stats_dir,
    timeline_file,
)

T0 = 1_795_000_000_000_000.0  # microseconds since the epoch


def finished_files(out: Path) -> list[Path]:
    return sorted((out / "framework" / "pevents").glob("*/*.json"))


def temporary_files(out: Path) -> list[Path]:
    return sorted(out.rglob("*.tmp"))


def write_steps(writer: TraceFileWriter, count: int, *, first: int = 0) -> None:
    for step in range(first, first + count):
        start = T0 + step * 1000.0
        writer.add(
            "Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", start, 800.0, {"step_num": str(step)}
        )
        writer.add("Forward", "Net", start, 300.0, {"step_num": str(step)})


def test_a_file_is_a_json_array_with_one_event_per_line_and_relative_times(tmp_path: Path) -> None:
    writer = TraceFileWriter(str(tmp_path), "0-algo-1", start_time_us=T0 - 500.0)
    write_steps(writer, 3)
    writer.close()

    [path] = finished_files(tmp_path)
    lines = path.read_text().splitlines()
    assert lines[0] == "[" and lines[-1] == "]"
    events = [json.loads(line.rstrip(",")) for line in lines[1:-1]]
    assert events == json.loads(path.read_text())  # every line is one whole event
    assert events[0] == {
        "name": "process_name",
        "ph": "M",
        "pid": 0,
        "args": {"start_time_since_epoch_in_micros": int(T0 - 500.0)},
    }
    steps = [e for e in events if e["ph"] == "X" and e["name"].startswith("Step:")]
    assert [e["ts"] for e in steps] == [500.0, 1500.0, 2500.0]
    assert {e["dur"] for e in steps} == {800.0}
    # Each phase is named once in the file; pid 0 only holds the start time, once.
    named = [e for e in events if e["name"] == "process_name"]
    assert [e["pid"] for e in named] == sorted({e["pid"] for e in named})
    assert sorted(e["args"]["name"] for e in named if e["pid"]) == [
        "Forward",
        "Step:ModeKeys.TRAIN",
    ]
    assert not any(e["pid"] == 0 for e in events if e["ph"] == "X")
    assert {e["tid"] for e in events if e["ph"] == "X"} == {0}


def test_the_file_name_says_when_its_last_event_ended_and_which_node_wrote_it(
    tmp_path: Path,
) -> None:
    writer = TraceFileWriter(str(tmp_path), "0-algo-1", start_time_us=T0)
    write_steps(writer, 2)
    writer.close()

    [path] = finished_files(tmp_path)
    last_end = int(T0 + 1000.0 + 800.0)
    assert path.relative_to(tmp_path).as_posix() == timeline_file(last_end, "0-algo-1")
    hour = time.strftime("%Y%m%d%H", time.gmtime(last_end / 1e6))
    assert path.parent.name == hour
    parsed = parse_timeline_file_name(path.name)
    assert parsed is not None
    assert (parsed.last_end_us, parsed.node_id, parsed.suffix) == (
        last_end,
        "0-algo-1",
        "pythontimeline.json",
    )


def test_the_open_file_has_a_temporary_name_that_readers_skip(tmp_path: Path) -> None:
    writer = TraceFileWriter(str(tmp_path), "0-algo-1", start_time_us=T0)
    write_steps(writer, 2)

    assert finished_files(tmp_path) == []
    [open_file] = temporary_files(tmp_path)
    assert open_file.parent == tmp_path / "framework"
    assert open_file.name.startswith("0-algo-1_pythontimeline.json.")
    assert TraceFileReader(str(tmp_path)).events() == []

    writer.close()
    assert temporary_files(tmp_path) == []
    assert len(TraceFileReader(str(tmp_path)).events()) == 4


def test_files_rotate_at_the_size_limit_and_each_stands_alone(tmp_path: Path) -> None:
    writer = TraceFileWriter(str(tmp_path), "0-algo-1", start_time_us=T0, max_file_size=2000)
    write_steps(writer, 40)
    writer.close()

    paths = finished_files(tmp_path)
    assert len(paths) > 3
    steps: list[int] = []
    for path in paths:
        events = json.loads(path.read_text())
        # Each file names its phases itself and carries the start time.
        assert events[0]["args"]["start_time_since_epoch_in_micros"] == int(T0)
        named = {e["pid"] for e in events if e["name"] == "process_name" and e["pid"]}
        assert {e["pid"] for e in events if e["ph"] == "X"} <= named
        last_end = max(e["ts"] + e["dur"] for e in events if e["ph"] == "X") + T0
        parsed = parse_timeline_file_name(path.name)
        assert parsed is not None and parsed.last_end_us == int(last_end)
        # A file closes with the event that took it past the limit, not long after.
        longest_line = max(len(line) for line in path.read_text().splitlines())
        assert path.stat().st_size < 2000 + 3 * longest_line
        steps += [int(e["args"]["step_num"]) for e in events if e["name"].startswith("Step:")]
    assert steps == list(range(40))


def test_files_rotate_when_their_time_is_up(tmp_path: Path) -> None:
    clock = FakeClock(100.0)
    writer = TraceFileWriter(
        str(tmp_path), "0-algo-1", start_time_us=T0, close_interval=60.0, clock=clock
    )
    write_steps(writer, 2)
    clock.now += 59.0
    writer.rotate_if_due()
    assert finished_files(tmp_path) == []

    clock.now += 1.0
    writer.rotate_if_due()  # nothing new arrived, the file closes all the same
    assert len(finished_files(tmp_path)) == 1

    write_steps(writer, 2, first=2)
    clock.now += 61.0
    write_steps(writer, 1, first=4)  # the old file closes before this event is written
    writer.close()
    counts = [
        len([e for e in json.loads(p.read_text()) if e["ph"] == "X"])
        for p in finished_files(tmp_path)
    ]
    assert counts == [4, 4, 2]


def test_the_writer_gives_up_after_too_many_failed_opens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the output directory should be")
    writer = TraceFileWriter(str(blocker), "0-algo-1", start_time_us=T0, open_fail_threshold=3)
    with caplog.at_level(logging.ERROR, logger="trainprobe"):
        write_steps(writer, 10)
        writer.close()

    assert not writer.healthy
    assert len([r for r in caplog.records if "cannot open a trace file" in r.message]) == 1


def test_the_reader_returns_events_by_time_range_and_node(tmp_path: Path) -> None:
    for node, offset in (("0-algo-1", 0.0), ("1-algo-1", 100.0)):
        writer = TraceFileWriter(str(tmp_path), node, start_time_us=T0, max_file_size=600)
        for step in range(10):
            start = T0 + step * 1000.0 + offset
            writer.add("Step:ModeKeys.TRAIN", "Step", start, 500.0, {"step_num": str(step)})
        writer.close()
    reader = TraceFileReader(str(tmp_path))

    assert {f.node_id for f in reader.files()} == {"0-algo-1", "1-algo-1"}
    window = reader.events(T0 + 3000.0, T0 + 5000.0)
    # Events overlapping [start, end): steps 3 and 4 of both nodes (step 2 ends before 3000).
    assert sorted((e.node_id, e.args["step_num"]) for e in window) == [
        ("0-algo-1", "3"),
        ("0-algo-1", "4"),
        ("1-algo-1", "3"),
        ("1-algo-1", "4"),
    ]
    one = reader.events(T0 + 3000.0, T0 + 5000.0, node_id="1-algo-1")
    assert [(e.start_us - T0, e.duration_us, e.phase) for e in one] == [
        (3100.0, 500.0, "Step:ModeKeys.TRAIN"),
        (4100.0, 500.0, "Step:ModeKeys.TRAIN"),
    ]


def test_node_ids_with_an_underscore_are_refused() -> None:
    assert check_trace_node_id("19853-vm") == "19853-vm"
    with pytest.raises(ConfigError) as raised:
        check_trace_node_id("0_algo_1")
    assert raised.value.suggestion == "0-algo-1"
    assert "node_id" in str(raised.value)


def test_python_stats_directories_are_named_as_smdebug_names_them() -> None:
    start = ProfilePoint("global", 9, "stepstart", 1795314532983397.0)
    end = ProfilePoint("global", 9, "forwardpassend", 1795314532993025.0)
    directory = python_stats_dir("pytorch", "cprofile", "19853-vm", start, end)
    # The example of reference/smdebug.md §5.1, with whole microseconds.
    assert directory == (
        "framework/pytorch/cprofile/19853-vm/"
        "global-9-stepstart-1795314532983397_global-9-forwardpassend-1795314532993025"
    )
    assert parse_python_stats_dir(directory) == (start, end)
    before = ProfilePoint("prestepzero", None, "start", 1.0)
    assert str(before) == "prestepzero-*-start-1"
    assert parse_python_stats_dir(f"{before}_{start}") == (before, start)
    assert parse_python_stats_dir("not_a-profile") is None
