"""The flight recorder in real trainings: a planted slow step is captured once, named by its
trigger and step, and explained against the ordinary step before it (what took longer, never a
negative "more"); a step slowed because another process took the training's core is noted, not
profiled; a healthy training makes no capture, even on a machine kept busy, where the recorder's
own profiling must not trigger it again; a step running over the hang limit has every thread's
stack written, and the report says where it was.

The trainings profile with FrameworkProfile's step ranges moved out of the way, so that only the
recorder runs torch.profiler; the default ranges are covered by the job tests. Most tests count a
step as slow only 0.5 s or more above the median (0.05 s by default), so that the planted
anomalies are unambiguous; those about a busy machine keep the defaults.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from framework_training import (
    Net,
    make_loader,
    nothing_left_running,  # noqa: F401 (an autouse fixture)
    plan_of,
    profiler_steps,
    train,
)
from torch.utils.data import DataLoader, Dataset

from trainprobe.analysis.profiling_data.flight_captures import compare_captures
from trainprobe.capture.pytorch.profiling import FrameworkProfiler
from trainprobe.capture.slow_step import SlowSteps
from trainprobe.config.framework_profile import FrameworkProfile
from trainprobe.report import build_report
from trainprobe.storage.contention_notes import read_contention_notes
from trainprobe.storage.flight_captures import Capture, list_captures, write_profile_request
from trainprobe.storage.training_stacks import read_stacks

pytestmark = pytest.mark.slow  # real trainings

NODE = "0-algo-1"
STEPS = 30
SLOW_STEP = 17
"""Early, soon after the recorder starts judging (step 16): few steps before it for a busy
machine to make slow."""
STALL_SECONDS = 1.0
NOTHING_SCHEDULED = FrameworkProfile(start_step=10_000, num_steps=1)


class StallingDataset(Dataset[tuple[torch.Tensor, int]]):
    """Random features; fetching the batch of step ``stall_at`` takes ``seconds`` longer."""

    def __init__(self, count: int, batch_size: int, stall_at: int | None, seconds: float) -> None:
        self.features = torch.randn(count, 16, generator=torch.Generator().manual_seed(0))
        self.stall_index = None if stall_at is None else stall_at * batch_size
        self.seconds = seconds

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if index == self.stall_index:
            time.sleep(self.seconds)
        return self.features[index], index % 4


class ExtraWorkNet(Net):
    """``Net`` whose forward at step ``s`` multiplies matrices for ``extra[s]`` seconds of the
    process's CPU time.

    Timed, not counted: a fixed number of products is under the bar on a fast machine; in CPU
    time, not wall time: on a machine others keep busy, wall time is not work done.
    """

    def __init__(self, extra: dict[int, float]) -> None:
        super().__init__(pause=0.01)
        self.extra = extra
        self.calls = 0
        self.big = torch.randn(500, 500)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        until = time.process_time() + self.extra.get(self.calls, 0.0)
        while time.process_time() < until:
            torch.mm(self.big, self.big)
        self.calls += 1
        return super().forward(x)


def recording_profiler(out: Path) -> FrameworkProfiler:
    profiler = FrameworkProfiler(plan_of(NOTHING_SCHEDULED), out, NODE, profile_after_close=False)
    if profiler.flight_recorder is not None:
        profiler.flight_recorder.slow_steps = SlowSteps(least_excess=0.5)
    return profiler


def profile(out: Path, steps: int = STEPS, **training: Any) -> FrameworkProfiler:
    profiler = recording_profiler(out)
    train(profiler, steps, **training)
    profiler.close()
    return profiler


def the_capture(out: Path, step: int) -> Capture:
    """The one capture under ``out``, which ``step`` triggered."""
    captures = list_captures(str(out))
    assert [capture.trigger_step for capture in captures] == [step], [
        capture.reason for capture in captures
    ]
    return captures[0]


def stalling_loader(stall_at: int | None) -> DataLoader[Any]:
    return DataLoader(StallingDataset(STEPS * 4, 4, stall_at, STALL_SECONDS), batch_size=4)


def test_a_data_loader_stall_is_captured_and_the_report_names_the_wait(tmp_path: Path) -> None:
    out = tmp_path / "job" / "profiler-output"
    profile(out, model=Net(pause=0.01), loader=stalling_loader(SLOW_STEP))

    capture = the_capture(out, SLOW_STEP - 1)
    # The stall happens while fetching step 17's batch, the end of step 16's time.
    assert capture.trigger == "slow_step"
    assert capture.slow_step is not None and capture.slow_step.step == SLOW_STEP - 1
    assert capture.slow_step.duration_s > STALL_SECONDS
    folder = out / capture.folder
    assert folder.name == f"slow_step-step{SLOW_STEP - 1:09d}"
    assert [step.step for step in capture.steps] == [SLOW_STEP, SLOW_STEP + 1]
    assert capture.comparison is not None and capture.comparison.step == SLOW_STEP + 2
    assert capture.trace == f"{NODE}.slow_step-steps17-18.pt.trace.json"
    assert capture.comparison_trace == f"{NODE}.comparison-step19.pt.trace.json"
    assert profiler_steps(folder / capture.trace) == [17, 18]
    assert profiler_steps(folder / capture.comparison_trace) == [19]

    report = build_report(tmp_path / "job", tmp_path / "report")
    listed = next(
        item
        for item in json.loads(Path(report.json).read_text())["FlightRecorder"]["Captures"]
        if item["TriggerStep"] == SLOW_STEP - 1
    )
    assert listed["Trigger"] == "slow_step" and listed["TriggerStep"] == SLOW_STEP - 1
    assert [step["Step"] for step in listed["Steps"]] == [17, 18]
    assert listed["Comparison"]["Step"] == 19
    assert listed["Files"] == [
        f"{capture.folder}/{capture.trace}",
        f"{capture.folder}/{capture.comparison_trace}",
    ]
    # Explained against the unprofiled step before it, not the profiled comparison step.
    assert capture.ordinary is not None and capture.ordinary.step == SLOW_STEP - 2
    assert listed["OrdinaryStep"]["Where"] == f"TRAIN step {SLOW_STEP - 2}"
    slowest = listed["Phases"][0]
    assert slowest["Phase"] == "DataLoading"
    assert slowest["OutlierSeconds"] - slowest["OrdinarySeconds"] > STALL_SECONDS - 0.05
    page = Path(report.html).read_text()
    section = page[page.index('id="flight-recorder"') :]
    assert f"TRAIN step {SLOW_STEP - 1} took " in listed["Headline"]
    said = f"more in DataLoading than TRAIN step {SLOW_STEP - 2}, an ordinary step ("
    assert said in listed["Headline"] and said in section
    assert not re.search(r"-[0-9.]+ s more", listed["Headline"])
    assert "the operator that differs most" not in listed["Headline"]  # usual steps follow
    assert capture.trace in section


def test_a_step_doing_extra_work_is_captured_with_its_operator(tmp_path: Path) -> None:
    # Well over the bar at the slow step, then less in the captured steps.
    extra = {SLOW_STEP: 1.2, SLOW_STEP + 1: 0.3, SLOW_STEP + 2: 0.3}
    profile(tmp_path, model=ExtraWorkNet(extra), loader=make_loader(STEPS, 4, num_workers=0))

    capture = the_capture(tmp_path, SLOW_STEP)
    assert capture.trigger == "slow_step"
    assert capture.slow_step is not None and capture.slow_step.step == SLOW_STEP
    assert [step.step for step in capture.steps] == [SLOW_STEP + 1, SLOW_STEP + 2]

    [comparison] = [found for found in compare_captures(str(tmp_path)) if found.capture == capture]
    assert comparison.phases[0].phase == "Forward"
    assert comparison.ordinary is not None and comparison.ordinary.step == SLOW_STEP - 1
    assert f"more in Forward than TRAIN step {SLOW_STEP - 1}, an ordinary step" in (
        comparison.headline
    )
    assert comparison.operators[0].name == "aten::mm", comparison.operators[:5]
    assert comparison.headline.endswith(
        "in the captured steps after it, the operator that differs most is aten::mm"
    )


def test_a_healthy_training_of_the_same_length_makes_no_capture(tmp_path: Path) -> None:
    profile(tmp_path, model=Net(pause=0.01), loader=stalling_loader(None))

    assert list_captures(str(tmp_path)) == []
    assert not (tmp_path / "framework" / "pytorch" / "flight_recorder").exists()


SPIN = (
    "import os, sys\n"
    "os.sched_setaffinity(0, {cores})\n"
    "sys.stdin.buffer.read(1)\n"
    "while True:\n"
    "    pass\n"
)


class Spinners:
    """Processes that spin on ``cores`` once released: another job taking the machine."""

    def __init__(self, count: int, cores: set[int]) -> None:
        command = [sys.executable, "-I", "-c", SPIN.format(cores=cores)]
        self.processes = [subprocess.Popen(command, stdin=subprocess.PIPE) for _ in range(count)]

    def release(self) -> None:
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.write(b"go")
            process.stdin.flush()

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait()


@pytest.fixture
def spinners() -> Iterator[list[Spinners]]:
    made: list[Spinners] = []
    yield made
    for spinning in made:
        spinning.stop()


def test_a_step_whose_core_another_process_took_is_noted_not_profiled(
    tmp_path: Path, spinners: list[Spinners]
) -> None:
    # The training runs on one core; during one step, twelve processes spin on it too.
    allowed, threads = os.sched_getaffinity(0), torch.get_num_threads()
    core = max(allowed)
    taking = Spinners(12, {core})
    spinners.append(taking)

    def take_the_core(step: int) -> None:
        if step == SLOW_STEP:
            taking.release()
        elif step == SLOW_STEP + 1:
            taking.stop()

    out = tmp_path / "job" / "profiler-output"
    os.sched_setaffinity(0, {core})
    torch.set_num_threads(1)
    try:
        model = Net(spin=0.1)  # 0.1 s on the CPU each step
        profile(out, model=model, loader=stalling_loader(None), before_step=take_the_core)
    finally:
        os.sched_setaffinity(0, allowed)
        torch.set_num_threads(threads)

    assert list_captures(str(out)) == []  # a profile would show nothing that differs
    [node] = read_contention_notes(str(out))
    [note] = node.notes
    assert (note.first_step, note.last_step) == (SLOW_STEP, SLOW_STEP)
    assert note.waited_s > note.duration_s / 2 > note.ran_s
    words = note.words()
    assert words.startswith(f"TRAIN step {SLOW_STEP} took ")
    assert "for a core: the machine was busy (load " in words
    report = build_report(tmp_path / "job", tmp_path / "report")
    [listed] = json.loads(Path(report.json).read_text())["FlightRecorder"]["Contention"]
    assert listed["Words"] == words
    page = Path(report.html).read_text()
    assert words in page[page.index('id="flight-recorder"') :]


def test_on_a_busy_machine_one_stall_makes_one_capture_and_nothing_else_does(
    tmp_path: Path, spinners: list[Spinners]
) -> None:
    # Two processes a core spin through the whole training; at the recorder's defaults (a step
    # is slow 50 ms over three times the median), only the planted stall is captured: neither
    # the machine nor the recorder's own profiling makes another.
    allowed = os.sched_getaffinity(0)
    busy = Spinners(2 * len(allowed), allowed)
    spinners.append(busy)
    busy.release()
    steps, stall = 80, 40
    plan = plan_of(NOTHING_SCHEDULED)
    profiler = FrameworkProfiler(plan, tmp_path, NODE, profile_after_close=False)
    loader = DataLoader(StallingDataset(steps * 4, 4, stall, STALL_SECONDS), batch_size=4)
    train(profiler, steps, model=Net(pause=0.01), loader=loader)
    profiler.close()
    busy.stop()

    [capture] = list_captures(str(tmp_path))
    assert capture.trigger == "slow_step" and capture.trigger_step == stall - 1
    [comparison] = compare_captures(str(tmp_path))
    assert comparison.phases[0].phase == "DataLoading"


def test_a_request_captures_the_next_steps_it_asks_for(tmp_path: Path) -> None:
    def ask_once(step: int) -> None:
        if step == 12:
            write_profile_request(str(tmp_path), 3, requested_by="trainprobe profile")

    profiler = recording_profiler(tmp_path)
    assert profiler.flight_recorder is not None
    profiler.flight_recorder.request_interval_us = 0.0
    train(profiler, 20, model=Net(pause=0.005), before_step=ask_once, loader=stalling_loader(None))
    profiler.close()

    [capture] = [c for c in list_captures(str(tmp_path)) if c.trigger == "request"]
    assert capture.trigger == "request"
    assert "trainprobe profile asked for 3 step(s)" in capture.reason
    assert [step.step for step in capture.steps] == [12, 13, 14]
    assert capture.comparison is None
    assert capture.trace is not None
    assert profiler_steps(tmp_path / capture.folder / capture.trace) == [12, 13, 14]
    manifest = json.loads((tmp_path / capture.folder / f"{NODE}.capture.json").read_text())
    assert manifest["steps"][0]["step"] == 12


def test_switched_off_it_captures_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPROBE_FLIGHT_RECORDER", "off")
    profiler = profile(tmp_path, model=Net(pause=0.01), loader=stalling_loader(SLOW_STEP))

    assert profiler.flight_recorder is None
    assert list_captures(str(tmp_path)) == []


def wait_on_a_lock_that_is_held(seconds: float) -> None:
    time.sleep(seconds)  # where the hang watch finds the training


def test_a_step_running_over_the_limit_writes_where_every_thread_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINPROBE_HANG_SECONDS", "1")
    out = tmp_path / "job" / "profiler-output"

    def hang_once(step: int) -> None:
        if step == 8:
            wait_on_a_lock_that_is_held(2.5)

    profile(out, 12, model=Net(), before_step=hang_once, loader=stalling_loader(None))

    [stacks] = read_stacks(str(out))
    assert stacks.node == NODE and stacks.step == 7
    assert stacks.reason.startswith("step 7 has run for ")
    line = wait_on_a_lock_that_is_held.__code__.co_firstlineno + 1
    assert stacks.where().startswith(
        f"{NODE} in step 7: the main thread waits in wait_on_a_lock_that_is_held "
        f"(test_flight_recorder.py:{line}) "
    )
    report = build_report(tmp_path / "job", tmp_path / "report")
    [listed] = json.loads(Path(report.json).read_text())["FlightRecorder"]["Stacks"]
    assert listed["Where"] == stacks.where()
    assert "wait_on_a_lock_that_is_held" in Path(report.html).read_text()
