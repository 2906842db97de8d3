"""The step timeline of real trainings: every step, its forward, backward, optimizer and data wait.

Event names and what the profiler rules read come from reference/smdebug.md §5.1 and §5.3 (Step
events ``Step:ModeKeys.<MODE>`` with ``step_num`` the step within its mode, DataLoader events with
``pid``/``num_workers``/``pin_memory``); §10 asks for backward events.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from framework_training import (
    Net,
    make_loader,
    nothing_left_running,  # noqa: F401 (an autouse fixture)
    steps_of,
    timeline,
    train,
)
from torch import nn
from torch.utils.data import dataloader as torch_dataloader

from reference_envs import run_reference
from trainprobe.capture.pytorch.profiling import FrameworkProfiler
from trainprobe.config.framework_profile import TraceFileSettings
from trainprobe.config.profiler_config import ProfilingPlan
from trainprobe.storage.trace_file import TraceEvent

TIMELINE_ONLY = ProfilingPlan()  # framework profiling on, no option range: the timeline alone


def by_step(events: list[TraceEvent], phase: str) -> dict[int, TraceEvent]:
    found: dict[int, TraceEvent] = {}
    for event in events:
        if event.phase == phase:
            assert event.args["global_step"] not in found, f"two {phase} events in one step"
            found[event.args["global_step"]] = event
    return found


def test_every_step_has_its_forward_backward_optimizer_and_data_wait(tmp_path: Path) -> None:
    profiler = FrameworkProfiler(TIMELINE_ONLY, tmp_path, "0-algo-1")
    ran = train(profiler, 10, loader=make_loader(batches=6), eval_steps=3)
    profiler.close()
    events = timeline(tmp_path)

    assert ran.train_steps == list(range(10)) and ran.eval_steps == [10, 11, 12]
    train_steps = by_step(events, "Step:ModeKeys.TRAIN")
    eval_steps = by_step(events, "Step:ModeKeys.EVAL")
    assert sorted(train_steps) == ran.train_steps and sorted(eval_steps) == ran.eval_steps
    # step_num is the step within its mode, as text; every event says which process it is.
    assert [train_steps[s].args["step_num"] for s in ran.train_steps] == [str(i) for i in range(10)]
    assert [eval_steps[s].args["step_num"] for s in ran.eval_steps] == ["0", "1", "2"]
    assert {e.args["pid"] for e in events if e.phase != "DataLoaderWorker"} == {os.getpid()}
    steps = {**train_steps, **eval_steps}
    forward = by_step(events, "Forward")
    backward = by_step(events, "Backward(post-forward)")
    optimizer = by_step(events, "Optimizer")
    waits = by_step(events, "DataLoading")
    assert sorted(forward) == sorted(waits) == sorted(steps)
    assert sorted(backward) == sorted(optimizer) == ran.train_steps  # no backward in eval
    assert {e.name for e in forward.values()} == {"Net"}
    assert {e.name for e in optimizer.values()} == {"SGD.step"}
    assert {e.name for e in waits.values()} == {"_MultiProcessingDataLoaderIter::GetNext"}

    previous_end = 0.0
    for step in sorted(steps):
        whole, wait = steps[step], waits[step]
        # The wait for a step's batch lies between the previous step and this one.
        assert previous_end <= wait.start_us <= wait.end_us <= whole.start_us
        assert whole.start_us == forward[step].start_us
        assert forward[step].end_us <= whole.end_us
        if step in backward:
            assert forward[step].end_us <= backward[step].start_us <= backward[step].end_us
            assert backward[step].end_us <= optimizer[step].start_us
            assert optimizer[step].end_us <= whole.end_us
        previous_end = whole.end_us

    # One iterator start per epoch (two of training, one of evaluation), with its workers.
    starts = [e for e in events if e.phase == "DataLoaderIterInitialize"]
    assert [e.name for e in starts] == ["_MultiProcessingDataLoaderIter.__init__"] * 3
    for start in starts:
        assert start.args["num_workers"] == 2 and start.args["pin_memory"] is False
        pids = start.args["worker_pids"]
        assert len(set(pids)) == 2 and os.getpid() not in pids


def test_a_model_returning_a_dict_still_has_its_backward_timed(tmp_path: Path) -> None:
    class DictNet(Net):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:  # type: ignore[override]
            return {"logits": super().forward(x), "features": x}

    profiler = FrameworkProfiler(TIMELINE_ONLY, tmp_path, "0-algo-1")
    model = DictNet()
    profiler.register_module(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, labels in make_loader(batches=3, num_workers=0):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs)["logits"], labels).backward()
        optimizer.step()
    profiler.close()

    events = timeline(tmp_path)
    assert steps_of(events, "Backward") == [0, 1, 2]
    assert {e.name for e in events if e.phase == "DataLoading"} == {
        "_SingleProcessDataLoaderIter::GetNext"
    }


def within(inner: TraceEvent, outer: TraceEvent) -> bool:
    return outer.start_us <= inner.start_us and inner.end_us <= outer.end_us


@pytest.mark.parametrize("as_keyword", [False, True], ids=["positional", "keyword"])
def test_an_optimizer_closure_is_timed_inside_its_step_and_returns_its_loss(
    tmp_path: Path, as_keyword: bool
) -> None:
    profiler = FrameworkProfiler(TIMELINE_ONLY, tmp_path, "0-algo-1")
    model = Net()
    profiler.register_module(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, labels in make_loader(batches=3, num_workers=0):

        def closure(inputs: torch.Tensor = inputs, labels: torch.Tensor = labels) -> torch.Tensor:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            closure.loss = loss  # type: ignore[attr-defined]
            return loss

        returned = optimizer.step(closure=closure) if as_keyword else optimizer.step(closure)
        assert returned is closure.loss  # type: ignore[attr-defined]
    profiler.close()

    events = timeline(tmp_path)
    closures = by_step(events, "OptimizerClosure")
    optimizer_steps = by_step(events, "Optimizer")
    assert sorted(closures) == sorted(optimizer_steps) == [0, 1, 2]
    assert {e.name for e in closures.values()} == {"SGD.step closure"}
    forward, backward = by_step(events, "Forward"), by_step(events, "Backward(post-forward)")
    for step, around in closures.items():
        # The passes run in the closure, the closure in the optimizer's step.
        assert within(around, optimizer_steps[step])
        assert within(forward[step], around) and within(backward[step], around)


def test_the_timeline_rotates_by_size_during_training(tmp_path: Path) -> None:
    plan = replace(TIMELINE_ONLY, trace_files=TraceFileSettings(file_max_size=3000))
    profiler = FrameworkProfiler(plan, tmp_path, "0-algo-1")
    train(profiler, 16)
    profiler.close()

    paths = sorted((tmp_path / "framework" / "pevents").glob("*/*_0-algo-1_pythontimeline.json"))
    assert len(paths) > 2
    for path in paths:
        assert json.loads(path.read_text())[-1]["ph"] == "X"  # each is whole, valid JSON
    assert not list(tmp_path.rglob("*.tmp"))
    assert sorted(steps_of(timeline(tmp_path))) == list(range(16))


def test_close_gives_torch_back_its_methods_and_records_nothing_more(tmp_path: Path) -> None:
    original_next = torch_dataloader._BaseDataLoaderIter.__next__
    profiler = FrameworkProfiler(TIMELINE_ONLY, tmp_path, "0-algo-1")
    model = Net()
    assert torch_dataloader._BaseDataLoaderIter.__next__ is not original_next
    train(profiler, 3, model=model)
    profiler.close()
    assert torch_dataloader._BaseDataLoaderIter.__next__ is original_next

    train(None, 3, model=model)
    assert sorted(steps_of(timeline(tmp_path))) == [0, 1, 2]


def test_a_disabled_plan_writes_nothing(tmp_path: Path) -> None:
    profiler = FrameworkProfiler(ProfilingPlan(enabled=False), tmp_path, "0-algo-1")
    ran = train(profiler, 4)
    profiler.close()

    assert ran.train_steps == [0, 1, 2, 3] and profiler.step == 3
    assert not (tmp_path / "framework").exists()


def test_a_compiled_model_has_its_steps_timed(tmp_path: Path) -> None:
    model = Net()
    compiled = torch.compile(model, backend="eager")  # dynamo only: no compiler run needed
    profiler = FrameworkProfiler(TIMELINE_ONLY, tmp_path, "0-algo-1")
    profiler.register_module(compiled)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, labels in make_loader(batches=4, num_workers=0):
        optimizer.zero_grad()
        nn.functional.cross_entropy(compiled(inputs), labels).backward()
        optimizer.step()
    profiler.close()

    events = timeline(tmp_path)
    for phase in ("Step:", "Forward", "Backward", "Optimizer"):
        assert steps_of(events, phase) == [0, 1, 2, 3], phase
    assert {e.name for e in events if e.phase == "Forward"} == {"Net"}


@pytest.mark.slow
def test_smdebug_reads_the_timeline_and_maps_steps_to_time(tmp_path: Path) -> None:
    plan = replace(TIMELINE_ONLY, trace_files=TraceFileSettings(file_max_size=5000))
    profiler = FrameworkProfiler(plan, tmp_path, "0-algo-1")
    train(profiler, 8)
    profiler.close()
    ours = timeline(tmp_path)

    found = run_reference(
        "smdebug",
        f"""
        import json
        from collections import Counter
        from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
        reader = LocalAlgorithmMetricsReader({str(tmp_path)!r})
        events = reader.get_events(0, 10**17)
        by_step = reader.get_events_by_step(2, 4)
        print(json.dumps({{
            "phases": Counter(e.event_phase for e in events),
            "nodes": sorted({{e.node_id for e in events}}),
            "steps": sorted({{e.event_args["step_num"] for e in by_step
                             if e.event_phase == "Step:ModeKeys.TRAIN"}}),
            "starts": sorted(e.start_time for e in events if e.event_phase.startswith("Step")),
        }}))
        """,
    )
    assert isinstance(found, dict)
    phases: dict[str, int] = {}
    for event in ours:
        phases[event.phase] = phases.get(event.phase, 0) + 1
    assert found["phases"] == phases
    assert found["nodes"] == ["algo-1-0"]  # smdebug puts the host first
    assert {"2", "3"} <= set(found["steps"])
    ours_starts = sorted(e.start_us for e in ours if e.phase.startswith("Step"))
    assert found["starts"] == ours_starts
