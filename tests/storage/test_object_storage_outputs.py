"""The profiler's and the rules' outputs on S3 (a real SeaweedFS server, tests/seaweedfs.py).

System metrics (a file per host per minute), framework trace files (uploaded when each one is
finished), TensorBoard event files (uploaded when closed) and a rule's output directory are
written to ``s3://bucket/prefix`` by the same writers that write local directories, and read
back by the same readers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing import event_accumulator

from trainprobe.storage import files
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.rule_output import (
    RuleOutputWriter,
    RuleStatus,
    read_evaluations,
    read_status,
)
from trainprobe.storage.system_metrics import MetricKey, SystemMetricsReader, SystemMetricsWriter
from trainprobe.storage.tensorboard_events import TensorBoardWriter
from trainprobe.storage.trace_file import TraceFileReader, TraceFileWriter

MINUTE = 1591160640  # the start of a minute
CPU0 = MetricKey("cpu", "cpu0", "CPUUtilization")
T0 = 1_795_000_000_000_000.0  # microseconds since the epoch


def test_system_metrics_minutes_land_in_the_bucket_and_read_back(s3_url: str) -> None:
    out = f"{s3_url}/profiler-output"
    writer = SystemMetricsWriter(out, "algo-1")
    for second, value in ((1.0, 10.0), (30.0, 20.0), (61.0, 30.0)):
        writer.write(MINUTE + second, [(CPU0, value)])
    writer.close()
    assert files.list_files(f"{out}/system") == [
        f"incremental/2020060305/{MINUTE:010d}.algo-1.json",
        f"incremental/2020060305/{MINUTE + 60:010d}.algo-1.json",
    ]
    events = SystemMetricsReader(out).events(MINUTE, MINUTE + 120)
    assert [(event.value, event.node_id) for event in events] == [
        (10.0, "algo-1"),
        (20.0, "algo-1"),
        (30.0, "algo-1"),
    ]


def test_a_trace_file_is_uploaded_when_it_is_finished(s3_url: str) -> None:
    out = f"{s3_url}/profiler-output"
    writer = TraceFileWriter(out, "0-algo-1", start_time_us=T0)
    for step in range(3):
        start = T0 + step * 1000.0
        writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", start, 800.0, {"step_num": step})
    assert files.list_files(out) == []  # nothing until the file is whole
    writer.close()
    [uploaded] = files.list_files(out)
    assert uploaded.startswith("framework/pevents/") and uploaded.endswith(
        "_0-algo-1_pythontimeline.json"
    )
    steps = [e for e in TraceFileReader(out).events() if e.name.startswith("Step:")]
    assert [e.start_us for e in steps] == [T0, T0 + 1000.0, T0 + 2000.0]


def test_a_rules_evaluations_and_status_land_in_the_bucket(s3_url: str) -> None:
    directory = f"{s3_url}/rule-output/LossNotDecreasing"
    writer = RuleOutputWriter(directory)
    writer.append_evaluation({"step": 10, "result": False})
    writer.append_evaluation({"step": 20, "result": True})
    writer.write_status(RuleStatus("LossNotDecreasing", "IssuesFound", "at step 20", 5.0, True, 2))
    writer.close()
    assert read_evaluations(directory) == [
        {"step": 10, "result": False},
        {"step": 20, "result": True},
    ]
    status = read_status(directory)
    assert status is not None and status.rule_evaluation_status == "IssuesFound"


def test_a_tensorboard_file_is_uploaded_when_it_is_closed(s3_url: str, tmp_path: Path) -> None:
    out = f"{s3_url}/tensorboard-output"
    writer = TensorBoardWriter(out)
    for step in range(3):
        writer.add_scalar(ModeKeys.TRAIN, "loss", 1.0 / (step + 1), step=step)
    writer.flush()
    assert files.list_files(out) == []  # an object appears whole, at the end
    writer.close()
    [name] = files.list_files(out)
    assert name.startswith("TRAIN/events.out.tfevents.")
    local = tmp_path / "TRAIN"
    local.mkdir()
    (local / "events.out.tfevents.copy").write_bytes(files.read_bytes(f"{out}/{name}"))
    run = event_accumulator.EventAccumulator(str(local))
    run.Reload()
    assert [(event.step, event.value) for event in run.Scalars("loss")] == [
        (0, 1.0),
        (1, 0.5),
        (2, float(np.float32(1 / 3))),
    ]
