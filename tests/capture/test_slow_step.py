"""The slow-step judgement (StepOutlier's semantics, step by step) and the flight recorder's
bounds: one capture at a time, no trace over its size limit, at most so many traces a process,
the oldest comparison dropped first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainprobe.capture.contention import ThreadClock, ThreadTimes, contention
from trainprobe.capture.pytorch.profiling.flight_recorder import FlightRecorder
from trainprobe.capture.slow_step import SlowSteps, default_factor
from trainprobe.config import catalogue
from trainprobe.config.errors import ConfigError
from trainprobe.storage.flight_captures import list_captures

NODE = "0-algo-1"


def test_the_default_factor_is_step_outliers_stddev_default() -> None:
    assert default_factor() == catalogue.get("StepOutlier").defaults()["stddev"] == 3


def test_a_step_is_slow_over_k_times_its_modes_median_after_the_warm_up() -> None:
    judge = SlowSteps(window=10, warmup=2, least_steps=4, refresh=1, least_excess=0.0)
    assert judge.judge("train", 9.0) is None  # warm-up: compilation, not judged
    assert judge.judge("train", 9.0) is None
    for _ in range(4):
        assert judge.judge("train", 0.1) is None
    assert judge.judge("train", 0.29) is None  # under 3 x the median of 0.1 s
    slow = judge.judge("train", 0.5)
    assert slow is not None
    assert slow.median_s == pytest.approx(0.1) and slow.threshold_s == pytest.approx(0.3)
    # The slow step did not join the median: the next one is judged against the same bar.
    assert judge.judge("train", 0.45) is not None
    # EVAL steps have their own median: long as they are, they are not slow TRAIN steps.
    for _ in range(8):
        assert judge.judge("eval", 1.0) is None


def test_a_step_must_also_exceed_the_median_by_the_least_excess() -> None:
    judge = SlowSteps(warmup=0, least_steps=3, refresh=1, least_excess=0.05)
    for _ in range(3):
        judge.judge("train", 0.002)
    assert judge.judge("train", 0.04) is None  # 20 x the median, but only 38 ms more
    assert judge.judge("train", 0.06) is not None


@pytest.mark.parametrize("factor", [1.0, 0.5, -3.0])
def test_a_factor_of_one_or_less_is_refused_naming_it(factor: float) -> None:
    with pytest.raises(ConfigError, match="factor") as caught:
        SlowSteps(factor)
    assert "greater than 1" in str(caught.value)


class Clock:
    """Step starts for a recorder driven by hand: 10 ms steps, and slow ones when asked."""

    def __init__(self, recorder: FlightRecorder) -> None:
        self.recorder = recorder
        self.step = 0
        self.now_us = 1.8e15

    def steps(self, count: int, seconds: float = 0.01) -> None:
        for _ in range(count):
            torch.ones(8).sum()  # something for torch.profiler to see
            self.recorder.step_started(self.step, "train", self.now_us, busy=False)
            self.step += 1
            self.now_us += seconds * 1e6


def recorder(out: Path, **bounds: int) -> FlightRecorder:
    judge = SlowSteps(warmup=0, least_steps=3, refresh=1, least_excess=0.0)
    bounds.setdefault("refractory_steps", 0)
    return FlightRecorder(str(out), NODE, slow_steps=judge, since_us=0.0, **bounds)


def test_at_most_so_many_traces_are_kept_the_oldest_comparison_going_first(
    tmp_path: Path,
) -> None:
    clock = Clock(recorder(tmp_path, max_traces=3))
    for _ in range(3):
        clock.steps(6)
        clock.steps(1, seconds=0.5)  # slow: 2 steps and a comparison are captured after it
    clock.steps(6)

    first, second = list_captures(str(tmp_path))  # the third found no room
    assert [first.trigger_step, second.trigger_step] == [6, 13]
    assert first.trace is not None and first.comparison_trace is None
    assert first.dropped == [
        f"{NODE}.comparison-step9.pt.trace.json: dropped to keep at most 3 traces"
    ]
    assert not (tmp_path / first.folder / f"{NODE}.comparison-step9.pt.trace.json").exists()
    assert second.trace is not None and second.comparison_trace is not None
    traces = sorted(path.name for path in tmp_path.rglob("*.pt.trace.json"))
    assert len(traces) == 3


def test_a_trace_over_the_size_limit_is_not_kept_and_its_manifest_says_why(
    tmp_path: Path,
) -> None:
    clock = Clock(recorder(tmp_path, max_bytes=100))
    clock.steps(6)
    clock.steps(1, seconds=0.5)
    clock.steps(5)

    [capture] = list_captures(str(tmp_path))
    assert capture.trace is None and capture.comparison_trace is None
    assert [step.step for step in capture.steps] == [7, 8]
    assert len(capture.dropped) == 2
    assert capture.dropped[0].startswith(f"{NODE}.slow_step-steps7-8.pt.trace.json: ")
    assert capture.dropped[0].endswith(" bytes, over the 100 bytes a trace may take")
    assert not list(tmp_path.rglob("*.pt.trace.json"))
    manifest = json.loads((tmp_path / capture.folder / f"{NODE}.capture.json").read_text())
    assert manifest["trace"] is None and manifest["dropped"] == capture.dropped


def test_after_a_capture_the_steps_it_slowed_are_not_judged_but_a_later_stall_is(
    tmp_path: Path,
) -> None:
    clock = Clock(recorder(tmp_path, refractory_steps=10))
    clock.steps(6)
    clock.steps(1, seconds=0.5)  # slow: steps 7-8 are captured, 9 compared, written at 10
    clock.steps(3)
    clock.steps(4, seconds=0.5)  # slowed by the capture's after-effects: not judged
    clock.steps(10)
    clock.steps(1, seconds=0.5)  # step 24: a stall of its own
    clock.steps(5)

    assert [capture.trigger_step for capture in list_captures(str(tmp_path))] == [6, 24]


def test_where_the_system_keeps_no_scheduler_statistics_no_step_is_put_down_to_it() -> None:
    assert ThreadClock("/no/such/schedstat").read() is None
    times = ThreadClock().read()
    if times is not None:  # Linux
        assert times.ran_s > 0 and times.waited_s >= 0
    assert contention(None, None, 1.0, 0.1) is None
    start, end = ThreadTimes(1.0, 1.0), ThreadTimes(1.1, 1.8)
    busy = contention(start, end, 1.0, 0.1)
    assert busy is not None and busy.waited_s == pytest.approx(0.8)
    assert busy.ran_s == pytest.approx(0.1)
    assert contention(start, ThreadTimes(1.9, 1.1), 1.0, 0.1) is None  # it ran: its own doing
    # It waited, but did more too: 0.5 s without the wait is still over a 0.3 s threshold.
    assert contention(start, ThreadTimes(1.45, 1.5), 1.0, 0.1, 0.3) is None
    assert contention(start, end, 1.0, 0.1, 0.3) is not None
