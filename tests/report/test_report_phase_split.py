"""The report's phase split counts each moment once, for trainings that step their optimizer
with a closure (the forward and backward passes run inside ``optimizer.step(closure)``).

Each training (``tests/report/closure_training.py``, which never imports trainprobe) runs under
``trainprobe run`` with its default profiler and ProfilerReport; the split in ProfilerReport's
OverallFrameworkMetrics data and in ``profiler-report.json`` is checked against the step
timeline the training wrote, read independently.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trainprobe.capture.pytorch.profiling.recorder import PROFILER_PHASE
from trainprobe.rules.profiler_rules.framework_summary import FrameworkTotals
from trainprobe.storage.trace_file import TraceEvent, TraceFileReader

pytestmark = pytest.mark.slow

TRAINING = Path(__file__).resolve().parent / "closure_training.py"
NESTED = ("Forward", "Backward(post-forward)")
CLOSURE = "OptimizerClosure"

_LIGHTNING = any(importlib.util.find_spec(name) for name in ("lightning", "pytorch_lightning"))


@dataclass(frozen=True)
class Job:
    timeline: list[TraceEvent]
    details: dict[str, Any]  # OverallFrameworkMetrics' report details
    content: dict[str, Any]  # profiler-report.json


def run_job(tmp_path: Path, how: str) -> Job:
    home = tmp_path / "home"
    command = ["run", str(TRAINING), "--name", how, "--", how]
    finished = subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", *command],
        env={**os.environ, "TRAINPROBE_HOME": str(home)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    job = home / "output" / how
    [rule_output] = (job / "rule-output").glob("ProfilerReport-*/profiler-output")
    overall = json.loads(
        (rule_output / "profiler-reports" / "OverallFrameworkMetrics.json").read_text()
    )
    return Job(
        TraceFileReader(str(job / "profiler-output")).events(),
        overall["Details"],
        json.loads((rule_output / "profiler-report.json").read_text()),
    )


def total_us(events: list[TraceEvent], phase: str) -> float:
    return sum(event.duration_us for event in events if event.phase == phase)


def nested_in(events: list[TraceEvent], outer: str) -> list[TraceEvent]:
    """The events (steps left out) that ran inside an event of phase ``outer``."""
    outers = [event for event in events if event.phase == outer]
    return [
        event
        for event in events
        if event.phase != outer
        and not event.phase.startswith("Step:")
        and any(
            around.node_id == event.node_id
            and around.start_us <= event.start_us
            and event.end_us <= around.end_us
            for around in outers
        )
    ]


def inside_us(events: list[TraceEvent], phases: tuple[str, ...], outer: str) -> float:
    """The time of the events of ``phases`` that ran inside an event of phase ``outer``."""
    return sum(event.duration_us for event in nested_in(events, outer) if event.phase in phases)


def check_shares(split: dict[str, dict[str, float]]) -> None:
    assert sum(entry["percent_of_step_time"] for entry in split.values()) <= 100.0


def check_split(job: Job) -> dict[str, dict[str, float]]:
    """The split's shares add up to at most 100 %, in the rule's data and in the report."""
    split = job.details["step_split"]
    check_shares(split)
    shown = job.content["Framework"]["PhaseSplit"]
    assert {row["Phase"] for row in shown} == set(split)
    assert sum(row["PercentOfStepTime"] for row in shown) <= 100.0
    for phase, entry in split.items():
        assert entry["percent_of_step_time"] == pytest.approx(
            entry["time_us"] / job.details["split_time_us"] * 100
        ), phase
    return split  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "how",
    [
        "closure",
        "lbfgs",
        pytest.param(
            "lightning",
            marks=pytest.mark.skipif(not _LIGHTNING, reason="PyTorch Lightning is not installed"),
        ),
    ],
)
def test_an_optimizer_step_with_a_closure_keeps_only_its_own_time(tmp_path: Path, how: str) -> None:
    job = run_job(tmp_path, how)
    split = check_split(job)
    events = job.timeline
    # The job's hook, and so its profiler, start in the first forward pass, inside the first
    # optimizer step: every pass after that one ran inside a closure, inside an optimizer step.
    first = min(e.start_us for e in events if e.phase == "Optimizer")
    later = [e for e in events if e.start_us > first]
    passes_us = sum(total_us(later, phase) for phase in NESTED)
    assert inside_us(events, NESTED, CLOSURE) == pytest.approx(passes_us)
    # Besides the passes, a closure holds only the hook's own work at a step's start, which the
    # timeline shows (phase ``trainprobe``) when it took over 1 ms: on a loaded machine.
    inner = nested_in(events, CLOSURE)
    assert {event.phase for event in inner} <= {*NESTED, PROFILER_PHASE}
    inner_us = sum(event.duration_us for event in inner)
    closures_us = total_us(events, CLOSURE)
    assert closures_us > 0 and inside_us(events, (CLOSURE,), "Optimizer") == pytest.approx(
        closures_us
    )
    # The passes keep all their time; the closure its own outside them (and outside the hook's);
    # the optimizer only its own, outside the closure.
    for phase in NESTED:
        assert split[phase]["time_us"] == pytest.approx(total_us(events, phase))
    assert split[CLOSURE]["time_us"] == pytest.approx(closures_us - inner_us)
    optimizer_us = total_us(events, "Optimizer") - closures_us
    assert split["Optimizer"]["time_us"] == pytest.approx(optimizer_us)
    shown = {row["Phase"]: row for row in job.content["Framework"]["PhaseSplit"]}
    assert shown["Optimizer"]["TimeMs"] == pytest.approx(optimizer_us / 1000, abs=1e-3)
    [optimizer] = [e for e in job.details["top_events"] if e["phase"] == "Optimizer"] or [None]
    assert optimizer is None or optimizer["time_us"] == pytest.approx(optimizer_us)

    # A timeline written before closures were timed (an older trainprobe's): the optimizer
    # keeps its time outside the passes.
    older = [e for e in events if e.phase != CLOSURE]
    totals = FrameworkTotals()
    totals.add(older)
    older_split = totals.step_split()
    check_shares(older_split)
    assert older_split["Optimizer"]["time_us"] == pytest.approx(
        total_us(older, "Optimizer") - inside_us(older, (*NESTED, PROFILER_PHASE), "Optimizer")
    )
    assert older_split["Forward"]["time_us"] == pytest.approx(split["Forward"]["time_us"])


def test_a_plain_optimizer_step_keeps_its_whole_time(tmp_path: Path) -> None:
    job = run_job(tmp_path, "plain")
    split = check_split(job)
    events = job.timeline
    assert total_us(events, CLOSURE) == 0 and inside_us(events, NESTED, "Optimizer") == 0
    for phase in (*NESTED, "Optimizer", "DataLoading"):
        assert split[phase]["time_us"] == pytest.approx(total_us(events, phase)), phase


def event(phase: str, start_ms: float, end_ms: float) -> TraceEvent:
    return TraceEvent(phase, phase, start_ms * 1e3, (end_ms - start_ms) * 1e3, {}, "0-algo-1", 1, 1)


def test_a_closure_read_after_the_passes_it_holds_keeps_only_its_own_time() -> None:
    # A rule following a live job reads the passes first: their closure and optimizer step are
    # written when they end, in a later read. Each moment still goes to the innermost event.
    totals = FrameworkTotals()
    totals.add([event("Forward", 10, 30), event("Backward(post-forward)", 30, 40)])
    totals.add([event(CLOSURE, 5, 45), event("Optimizer", 0, 50)])
    totals.add([event("Forward", 60, 80)])  # the next step
    split = totals.step_split()
    assert split["Forward"]["time_us"] == pytest.approx(40_000)
    assert split["Backward(post-forward)"]["time_us"] == pytest.approx(10_000)
    assert split[CLOSURE]["time_us"] == pytest.approx(10_000)
    assert split["Optimizer"]["time_us"] == pytest.approx(10_000)
    assert totals.split_time_us == pytest.approx(70_000)
