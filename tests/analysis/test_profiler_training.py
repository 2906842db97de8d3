"""``trainprobe.profiler`` on what a real training wrote: the system monitor sampling every 100 ms
in its own process, and the FrameworkProfiler with detailed, data loader and Python profiling on,
over a DataLoader with worker processes.

What is expected is taken from the files themselves through the storage readers (the timeline's
Step and DataLoading events say when each step ran) and from what the training did (its steps,
modes and a function made slow on purpose), never from the code under test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from capture.framework_training import Net, Ran, make_loader, train
from trainprobe.capture.pytorch.profiling import FrameworkProfiler
from trainprobe.config.framework_profile import FrameworkProfile
from trainprobe.config.metrics_config import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    PythonProfilingConfig,
)
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.profiler import ProfilerData
from trainprobe.storage.system_metrics import SystemMetricsReader
from trainprobe.storage.trace_file import TraceEvent, TraceFileReader

pytestmark = pytest.mark.slow

PAUSE = 0.15  # each forward sleeps this long, so every step outlasts a 100 ms sampling interval
DETAILED, DATALOADER, PYTHON = (2, 4), (6, 8), (4, 6)  # [start, end) steps of each option
BATCHES = 6  # a new epoch (and new DataLoader workers) starts at step 6


def crunch_numbers() -> int:
    """Busy in its own code: a Python loop that calls nothing."""
    total = 0
    for number in range(200_000):
        total += number * number % 7
    return total


class SlowNet(Net):
    """``Net`` that also crunches numbers in every forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        crunch_numbers()
        return super().forward(x)


@dataclass
class Job:
    out: Path
    config: ProfilerConfig
    ran: Ran
    node_id: str
    monitor_returncode: int


def _range(steps: tuple[int, int]) -> dict[str, int]:
    return {"start_step": steps[0], "num_steps": steps[1] - steps[0]}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    """One short training, profiled by everything, with the system monitor running beside it."""
    out = tmp_path_factory.mktemp("job") / "profiler-output"
    monitor = subprocess.Popen(
        [
            *(sys.executable, "-m", "trainprobe.capture.system_monitor", "--out", str(out)),
            *("--interval-ms", "100", "--pid", str(os.getpid())),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        reader = SystemMetricsReader(str(out))
        deadline = time.monotonic() + 60
        while reader.last_timestamp() is None:
            assert time.monotonic() < deadline, "the system monitor wrote nothing"
            time.sleep(0.05)
        config = ProfilerConfig(
            framework_profile_params=FrameworkProfile(
                detailed_profiling_config=DetailedProfilingConfig(**_range(DETAILED)),
                dataloader_profiling_config=DataloaderProfilingConfig(**_range(DATALOADER)),
                python_profiling_config=PythonProfilingConfig(
                    **_range(PYTHON), cprofile_timer="total_time"
                ),
            )
        )
        profiler = FrameworkProfiler(config.profiling_plan(), out, profile_after_close=False)
        ran = train(
            profiler,
            9,
            model=SlowNet(pause=PAUSE),
            loader=make_loader(batches=BATCHES, num_workers=2),
            eval_steps=3,
        )
        profiler.close()
        time.sleep(0.3)  # a few samples after the last step
        monitor.send_signal(signal.SIGTERM)
        monitor.communicate(timeout=60)
        yield Job(out, config, ran, profiler.node_id, monitor.returncode)
    finally:
        monitor.kill()


@pytest.fixture(scope="module")
def data(job: Job) -> ProfilerData:
    return ProfilerData(job.out, plan=job.config)


def timeline(job: Job) -> list[TraceEvent]:
    return TraceFileReader(str(job.out)).events()


def step_events(job: Job) -> dict[int, TraceEvent]:
    return {e.args["global_step"]: e for e in timeline(job) if e.phase.startswith("Step:")}


def span_starts(job: Job) -> dict[int, float]:
    """Where each step's span starts: the start of the wait for its batch, or of the step."""
    starts = {step: event.start_us for step, event in step_events(job).items()}
    for event in timeline(job):
        if event.phase == "DataLoading":
            step = event.args["global_step"]
            starts[step] = min(starts[step], event.start_us)
    return starts


def strict_chrome_trace_problems(document: Any) -> list[str]:
    """What keeps ``document`` from being a Chrome trace a strict reader accepts."""
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    problems = []
    for event in document["traceEvents"]:
        if not isinstance(event, dict):
            problems.append(f"not an object: {event!r}")
            continue
        if not isinstance(event.get("ph"), str) or not event["ph"]:
            problems.append(f"no ph: {event}")
        if not isinstance(event.get("ts"), (int, float)) or isinstance(event.get("ts"), bool):
            problems.append(f"no numeric ts: {event}")
        if not isinstance(event.get("pid"), int) or isinstance(event.get("pid"), bool):
            problems.append(f"no integer pid: {event}")
        if "tid" in event and not isinstance(event["tid"], int):
            problems.append(f"tid not an integer: {event}")
        if event.get("ph") == "X" and not (
            isinstance(event.get("dur"), (int, float)) and event["dur"] >= 0
        ):
            problems.append(f"complete event without a duration: {event}")
        if event.get("ph") == "C":
            args = event.get("args")
            if not isinstance(args, dict) or not args:
                problems.append(f"counter without values: {event}")
            elif not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in args.values()
            ):
                problems.append(f"counter with a value that is not a number: {event}")
    return problems


def test_the_monitor_and_the_training_both_wrote(job: Job) -> None:
    assert job.monitor_returncode == 0
    assert job.ran.train_steps == list(range(9)) and job.ran.eval_steps == [9, 10, 11]


def test_every_system_reading_comes_back_with_the_step_running_on_its_host(
    job: Job, data: ProfilerData
) -> None:
    frame = data.system_metrics()
    readings = SystemMetricsReader(str(job.out)).events(0, 10**10)
    assert len(frame) == len(readings)
    assert list(frame.columns[:6]) == [
        "timestamp_us",
        "node_id",
        "type",
        "name",
        "dimension",
        "value",
    ]
    assert set(frame["node_id"]) == {"algo-1"}
    assert sorted(frame["value"]) == sorted(r.value for r in readings)
    # The training ran on this machine, under its own node id: its steps are the host's.
    assert set(frame["step_node_id"].dropna()) == {job.node_id}

    events, starts = step_events(job), span_starts(job)
    for row in frame.itertuples():
        inside = [
            step
            for step, event in events.items()
            if starts[step] <= row.timestamp_us < event.end_us
        ]
        if inside:
            [step] = inside
            assert row.step == step, row
            assert row.mode == events[step].args["mode"], row
        else:
            assert pd.isna(row.step) and pd.isna(row.mode), row
    aligned = frame.dropna(subset=["step"])
    # Every step lasts longer than the sampling interval: most steps hold a sample.
    assert set(aligned["mode"]) == {"TRAIN", "EVAL"}
    assert aligned["step"].nunique() >= 6
    eval_rows = aligned[aligned["mode"] == "EVAL"]
    assert (eval_rows["mode_step"] == eval_rows["step"] - 9).all()


def test_a_step_range_selects_the_readings_and_events_of_those_steps(
    job: Job, data: ProfilerData
) -> None:
    everything = data.system_metrics()
    chosen = data.system_metrics(start_step=3, end_step=5)
    expected = everything[everything["step"].isin([3, 4])]
    assert len(chosen) > 0
    assert chosen.reset_index(drop=True).equals(expected.reset_index(drop=True))

    events = data.framework_events(start_step=3, end_step=5)
    assert set(events["step"]) == {3, 4}
    for step in (3, 4):
        phases = events[events["step"] == step]["phase"].tolist()
        assert phases.count("Step:ModeKeys.TRAIN") == 1
        for phase in ("Forward", "Backward(post-forward)", "Optimizer", "DataLoading"):
            assert phase in phases, (step, phases)

    only_eval = data.framework_events(mode="EVAL", phase="Step:ModeKeys.EVAL")
    assert only_eval["step"].tolist() == job.ran.eval_steps
    assert only_eval["mode_step"].tolist() == [0, 1, 2]
    assert set(data.system_metrics(mode="eval")["mode"]) == {"EVAL"}


def test_a_time_range_selects_what_overlaps_it(job: Job, data: ProfilerData) -> None:
    step_two = step_events(job)[2]
    events = data.framework_events(step_two.start_us, step_two.end_us)
    steps = events[events["phase"] == "Step:ModeKeys.TRAIN"]["step"].tolist()
    assert steps == [2]  # the steps before and after only touch it
    readings = data.system_metrics(step_two.start_us, step_two.end_us)
    assert readings["timestamp_us"].between(step_two.start_us, step_two.end_us).all()
    assert set(readings["step"].dropna()) <= {2}


def test_data_loader_events_carry_the_steps_they_served(job: Job, data: ProfilerData) -> None:
    frame = data.framework_events()
    waits = frame[frame["phase"] == "DataLoaderIter"]
    assert waits["step"].tolist() == list(range(*DATALOADER))
    assert set(waits["pid"]) == {os.getpid()}
    workers = frame[frame["phase"] == "DataLoaderWorker"]
    assert len(workers) > 0
    assert os.getpid() not in set(workers["pid"])
    iterators = [e for e in timeline(job) if e.phase == "DataLoaderIterInitialize"]
    second_epoch = iterators[1]  # its workers served steps 6 and 7
    assert set(workers["pid"]) <= set(second_epoch.args["worker_pids"])
    assert 6 in set(workers["step"].dropna())


def test_step_durations_per_node_and_mode_are_the_step_events(job: Job, data: ProfilerData) -> None:
    steps = data.steps()
    events = step_events(job)
    assert set(steps["node_id"]) == {job.node_id}
    assert steps[steps["mode"] == "TRAIN"]["step"].tolist() == job.ran.train_steps
    assert steps[steps["mode"] == "EVAL"]["step"].tolist() == job.ran.eval_steps
    for row in steps.itertuples():
        assert row.duration_us == pytest.approx(events[row.step].duration_us)
        assert row.duration_us >= PAUSE * 1e6  # every forward slept that long
        assert row.wait_us >= 0
    stats = data.step_stats().set_index("mode")
    assert stats.loc["TRAIN", "count"] == 9 and stats.loc["EVAL", "count"] == 3
    train = steps[steps["mode"] == "TRAIN"]["duration_us"]
    assert stats.loc["TRAIN", "mean_us"] == pytest.approx(train.mean())
    assert stats.loc["TRAIN", "max_us"] == train.max()
    assert (
        stats.loc["TRAIN", "min_us"] <= stats.loc["TRAIN", "p50_us"] <= stats.loc["TRAIN", "p95_us"]
    )
    assert len(data.steps(start_step=2, end_step=4)) == 2


def test_the_python_profiles_of_the_profiled_steps_are_listed_with_their_clock(
    job: Job, data: ProfilerData
) -> None:
    listing = data.python_profiles_frame()
    columns = ["start_step", "start_phase", "end_step", "end_phase"]
    segments = list(listing[columns].itertuples(index=False, name=None))
    assert segments[1:] == [
        (step, phase, end_step, end_phase)
        for step in range(*PYTHON)
        for phase, end_step, end_phase in (
            ("stepstart", step, "forwardpassend"),
            ("forwardpassend", step + 1, "stepstart"),
        )
    ]
    assert listing["start_mode"].iloc[0] == "prestepzero" and pd.isna(listing["start_step"].iloc[0])
    assert set(listing["node_id"]) == {job.node_id}
    assert set(listing["profiler"]) == {"cprofile"} and set(listing["timer"]) == {"total_time"}
    assert (listing["end_us"] > listing["start_us"]).all()
    # A step range leaves out the profile before step 0.
    assert len(data.python_profiles(*PYTHON)) == 4


def test_the_cprofile_clock_is_read_from_the_profiles_without_the_plan(job: Job) -> None:
    listing = ProfilerData(job.out).python_profiles_frame()
    assert len(listing) == 5  # before step 0, then two segments of each of the two steps
    assert set(listing["timer"]) == {"total_time"}


def test_top_functions_of_a_step_range_show_the_function_made_slow(
    data: ProfilerData,
) -> None:
    own = data.top_functions(*PYTHON, by="own", limit=10)
    assert "crunch_numbers" in own["function"].tolist()
    assert own["own_s"].is_monotonic_decreasing
    # Of the functions written in Python (cProfile files built-ins under "~"), it comes first.
    python_functions = own[own["filename"] != "~"]
    assert python_functions["function"].iloc[0] == "crunch_numbers"
    cumulative = data.top_functions(*PYTHON, by="cumulative", limit=None)
    ranked = cumulative["function"].tolist()
    # forward calls crunch_numbers (and sleeps): it ranks above it by cumulative time.
    assert ranked.index("forward") < ranked.index("crunch_numbers")
    crunch = cumulative.iloc[ranked.index("crunch_numbers")]
    assert crunch["calls"] == 2  # one forward in each profiled step
    assert crunch["cumulative_s"] >= crunch["own_s"] > 0
    assert "forward" in data.top_functions(*PYTHON, limit=10)["function"].tolist()

    [forward_of_first] = [p for p in data.python_profiles(*PYTHON)][:1]
    functions = data.profile_functions(forward_of_first)
    assert "crunch_numbers" in functions["function"].tolist()
    assert data.top_functions(0, 2).empty  # no profile there


def test_the_merged_timeline_holds_counters_steps_and_the_detailed_trace(
    job: Job, data: ProfilerData, tmp_path: Path
) -> None:
    written = data.merge_timeline(tmp_path / "timeline.json")
    document = json.loads((tmp_path / "timeline.json").read_text())
    assert strict_chrome_trace_problems(document) == []
    events = document["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    counters = [e for e in events if e["ph"] == "C"]
    assert written.counter_events == len(counters) > 0
    assert {names[e["pid"]] for e in counters} == {"algo-1 system metrics"}
    assert "cpu CPUUtilization" in {e["name"] for e in counters}
    steps = [e for e in events if e["ph"] == "X" and e["name"].startswith("Step:ModeKeys.")]
    assert sorted(e["args"]["global_step"] for e in steps) == list(range(12))
    marks = {e["name"] for e in events if e["name"].startswith("ProfilerStep#")}
    assert marks == {f"ProfilerStep#{step}" for step in range(*DETAILED)}
    # Times are relative to the origin written beside them.
    origin = document["otherData"]["start_time_since_epoch_in_micros"]
    step_zero = next(e for e in steps if e["args"]["global_step"] == 0)
    assert origin + step_zero["ts"] == pytest.approx(step_events(job)[0].start_us, abs=1)


def test_a_merged_step_range_holds_only_those_steps(data: ProfilerData, tmp_path: Path) -> None:
    data.merge_timeline(tmp_path / "steps.json", start_step=6, end_step=8)
    events = json.loads((tmp_path / "steps.json").read_text())["traceEvents"]
    steps = [e for e in events if e["ph"] == "X" and e["name"].startswith("Step:")]
    assert sorted(e["args"]["global_step"] for e in steps) == [6, 7]
    assert not [e for e in events if e["name"].startswith("ProfilerStep#")]
    assert any(e["ph"] == "C" for e in events)


def test_the_command_line_writes_the_merged_timeline(job: Job, tmp_path: Path) -> None:
    out = tmp_path / "merged.json"
    command = [sys.executable, "-m", "trainprobe.profiler", "merge", str(job.out)]
    done = subprocess.run(
        [*command, "--out", str(out), "--start-step", "2", "--end-step", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert strict_chrome_trace_problems(json.loads(out.read_text())) == []
    refused = subprocess.run(
        [*command, "--out", str(tmp_path / "none.json"), "--start-step", "100"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "start_step" in refused.stderr and "steps 0 to 11" in refused.stderr
    assert not (tmp_path / "none.json").exists()
