"""Detailed, data loader and Python profiling of real trainings, alone, together, by step or time.

Defaults and semantics come from spec 002 and the SDK classes (spec 004): FrameworkProfile()
profiles step 5 in detail, the data loader at step 7 and Python at steps 9-11, cProfile's timer
going total time, CPU time, off-CPU time over those three steps; a FrameworkProfile range applies
to all three options; individual configs win over it. The output layout is reference/smdebug.md
§5.1.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import pstats
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from framework_training import (
    Net,
    PythonProfile,
    WorkerMarkedDataset,
    detailed_traces,
    make_loader,
    mark_worker,
    nothing_left_running,  # noqa: F401 (an autouse fixture)
    plan_of,
    profiler_steps,
    python_profiles,
    spin_a_while,
    timeline,
    train,
)
from torch.utils.data import DataLoader

from reference_envs import REPO, run_reference
from trainprobe.capture.pytorch.profiling import FrameworkProfiler
from trainprobe.config.framework_profile import FrameworkProfile
from trainprobe.config.metrics_config import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    PythonProfilingConfig,
)
from trainprobe.storage.trace_file import TraceEvent

NODE = "0-algo-1"


def loader_events(out: Path, phase: str) -> list[TraceEvent]:
    return [e for e in timeline(out) if e.phase == phase]


def step_profiles(out: Path) -> list[PythonProfile]:
    return [p for p in python_profiles(out) if p.start.mode not in ("prestepzero", "posthookclose")]


def segments(profiles: list[PythonProfile]) -> list[tuple[int | None, str, int | None, str]]:
    return [(p.start.step, p.start.phase, p.end.step, p.end.phase) for p in profiles]


def function_time(stats: pstats.Stats, function: str) -> float:
    """The time spent in a function and what it called (cumtime), by the profile's clock."""
    table = stats.stats  # type: ignore[attr-defined]
    return sum(row[3] for key, row in table.items() if key[2] == function)


def test_default_framework_profile_profiles_steps_5_7_and_9_to_11(tmp_path: Path) -> None:
    profiler = FrameworkProfiler(
        plan_of(FrameworkProfile()), tmp_path, NODE, profile_after_close=False
    )
    train(profiler, 14, model=Net(pause=0.02), loader=make_loader(batches=12))
    profiler.close()

    # Detailed profiling: one torch.profiler trace of step 5, under its start step.
    [trace] = detailed_traces(tmp_path)
    assert trace.parent.name == "000000005" and trace.name.startswith(f"{NODE}.")
    assert trace.parent.parent.parent.name == "detailed_profiling"
    assert profiler_steps(trace) == [5]

    # Data loader profiling: the wait for step 7's batch, and workers loading during it.
    waits = loader_events(tmp_path, "DataLoaderIter")
    assert [e.args["step_num"] for e in waits] == ["7"]
    assert waits[0].name == "_MultiProcessingDataLoaderIter::GetNext"
    assert waits[0].args["num_workers"] == 2 and waits[0].args["prefetch_factor"] == 2
    [first_epoch, _] = loader_events(tmp_path, "DataLoaderIterInitialize")
    workers = loader_events(tmp_path, "DataLoaderWorker")
    assert workers, "no worker loaded a batch while step 7 ran"
    assert {e.args["pid"] for e in workers} <= set(first_epoch.args["worker_pids"])
    assert {e.tid for e in workers} == {e.args["worker_id"] for e in workers} <= {0, 1}

    # Python profiling: steps 9, 10 and 11, two segments each, and the time before step 0.
    profiles = python_profiles(tmp_path)
    assert segments(profiles) == [
        (None, "start", 0, "stepstart"),
        *[
            segment
            for step in (9, 10, 11)
            for segment in (
                (step, "stepstart", step, "forwardpassend"),
                (step, "forwardpassend", step + 1, "stepstart"),
            )
        ],
    ]
    assert profiles[0].start.mode == "prestepzero" and profiles[0].end.mode == "train"
    assert {p.start.mode for p in profiles[1:]} == {"train"}
    for profile in profiles:
        assert profile.profiler == "cprofile" and profile.directory.parent.name == NODE
        assert sorted(f.name for f in profile.directory.iterdir()) == [
            "cprofile_timer",
            "python_stats",
        ]
        assert pstats.Stats(str(profile.directory / "python_stats")).total_calls > 0  # type: ignore[attr-defined]
    forward_of_step_9 = pstats.Stats(str(profiles[1].directory / "python_stats"))
    assert function_time(forward_of_step_9, "forward") > 0


def test_the_default_cprofile_timers_are_total_cpu_and_off_cpu_time_in_turn(
    tmp_path: Path,
) -> None:
    config = PythonProfilingConfig(profile_default_steps=True)
    plan = plan_of(FrameworkProfile(python_profiling_config=config))
    profiler = FrameworkProfiler(plan, tmp_path, NODE, profile_after_close=False)
    # The sleep is long beside the spin, so that a loaded machine, which keeps the spinning
    # thread waiting for a core now and then, cannot give the spin more off-CPU time.
    pause, spin = 0.25, 0.03
    train(profiler, 12, model=Net(pause=pause, spin=spin), loader=make_loader(num_workers=0))
    profiler.close()

    forwards = {
        p.start.step: pstats.Stats(str(p.directory / "python_stats"))
        for p in step_profiles(tmp_path)
        if p.start.phase == "stepstart"
    }
    assert sorted(forwards) == [9, 10, 11]
    # Each profile names its clock beside it, for both segments of the step.
    timers = {
        (p.start.step, p.start.phase): (p.directory / "cprofile_timer").read_text()
        for p in step_profiles(tmp_path)
    }
    assert timers == {
        (step, phase): f"{timer}\n"
        for step, timer in ((9, "total_time"), (10, "cpu_time"), (11, "off_cpu_time"))
        for phase in ("stepstart", "forwardpassend")
    }
    sleeping = {step: function_time(stats, "sleep_a_while") for step, stats in forwards.items()}
    spinning = {step: function_time(stats, "spin_a_while") for step, stats in forwards.items()}
    # Step 9, total time: the wall clock sees both the sleep and the spin.
    assert sleeping[9] >= pause * 0.9 and spinning[9] >= spin * 0.9
    # Step 10, CPU time: the sleep costs next to nothing, the spin all its CPU time.
    assert spinning[10] >= spin * 0.9 and sleeping[10] < pause * 0.1
    # Step 11, off-CPU time: the sleep is all waiting, the spin mostly not.
    assert sleeping[11] >= pause * 0.9 and spinning[11] < sleeping[11]


def busy_beside_the_training(stop: threading.Event) -> None:
    """Another thread's Python work (a logger, a prefetcher), while the training runs."""
    while not stop.is_set():
        spin_a_while(0.002)
        stop.wait(0.005)


def test_another_threads_calls_stay_out_of_the_training_threads_profile(tmp_path: Path) -> None:
    # From Python 3.12 cProfile hears every thread unless told otherwise.
    config = PythonProfilingConfig(profile_default_steps=True)
    plan = plan_of(FrameworkProfile(python_profiling_config=config))
    profiler = FrameworkProfiler(plan, tmp_path, NODE, profile_after_close=False)
    stop = threading.Event()
    beside = threading.Thread(target=busy_beside_the_training, args=(stop,))
    beside.start()
    try:
        train(profiler, 12, model=Net(pause=0.1), loader=make_loader(num_workers=0))
    finally:
        stop.set()
        beside.join()
    profiler.close()

    profiles = step_profiles(tmp_path)
    assert len(profiles) == 6  # steps 9 to 11, two segments each
    for profile in profiles:
        stats = pstats.Stats(str(profile.directory / "python_stats"))
        functions = {key[2] for key in stats.stats}  # type: ignore[attr-defined]
        assert "busy_beside_the_training" not in functions
        assert "spin_a_while" not in functions
    forwards = [p for p in profiles if p.start.phase == "stepstart"]
    clocks = [(p.directory / "cprofile_timer").read_text().strip() for p in forwards]
    assert clocks == ["total_time", "cpu_time", "off_cpu_time"]
    sleeping = [
        function_time(pstats.Stats(str(p.directory / "python_stats")), "sleep_a_while")
        for p in forwards
    ]
    # Wall clock and off-CPU time see the whole sleep, the training thread's CPU time none of it.
    assert sleeping[0] >= 0.09 and sleeping[2] >= 0.09 and 0 <= sleeping[1] < 0.01


def test_detailed_profiling_alone_records_operators_shapes_and_memory(tmp_path: Path) -> None:
    config = DetailedProfilingConfig(start_step=2, num_steps=2)
    plan = plan_of(FrameworkProfile(detailed_profiling_config=config))
    profiler = FrameworkProfiler(plan, tmp_path, NODE)
    train(profiler, 6)
    profiler.close()

    [trace] = detailed_traces(tmp_path)
    assert trace.parent.name == "000000002"
    assert profiler_steps(trace) == [2, 3]
    content = json.loads(trace.read_text())
    events = content["traceEvents"] if isinstance(content, dict) else content
    operators = [e for e in events if e.get("cat") == "cpu_op"]
    assert any(e["name"] == "aten::addmm" for e in operators)
    assert any("Input Dims" in e.get("args", {}) for e in operators)  # record_shapes
    assert any(e.get("name") == "[memory]" for e in events)  # profile_memory
    assert python_profiles(tmp_path) == []
    assert loader_events(tmp_path, "DataLoaderIter") == []


def test_data_loader_profiling_alone_and_its_metrics_regex(tmp_path: Path) -> None:
    config = DataloaderProfilingConfig(start_step=3, num_steps=2)
    plan = plan_of(FrameworkProfile(dataloader_profiling_config=config))
    profiler = FrameworkProfiler(plan, tmp_path / "all", NODE)
    train(profiler, 8, model=Net(pause=0.02), loader=make_loader(batches=12))
    profiler.close()

    waits = loader_events(tmp_path / "all", "DataLoaderIter")
    assert [e.args["step_num"] for e in waits] == ["3", "4"]
    assert {e.args["pid"] for e in waits} == {os.getpid()}
    steps = {
        e.args["global_step"]: e for e in timeline(tmp_path / "all") if e.phase.startswith("Step")
    }
    workers = loader_events(tmp_path / "all", "DataLoaderWorker")
    assert workers
    for worker in workers:
        # Each fetch written overlaps step 3 or 4 (or the wait for their batches).
        assert worker.start_us <= steps[4].end_us and worker.end_us >= waits[0].start_us
        assert worker.args["pid"] != os.getpid() and worker.args["num_workers"] == 2
    assert detailed_traces(tmp_path / "all") == [] and python_profiles(tmp_path / "all") == []

    only_waits = DataloaderProfilingConfig(start_step=3, num_steps=2, metrics_regex="GetNext")
    plan = plan_of(FrameworkProfile(dataloader_profiling_config=only_waits))
    profiler = FrameworkProfiler(plan, tmp_path / "regex", NODE)
    train(profiler, 8, model=Net(pause=0.02), loader=make_loader(batches=12))
    profiler.close()
    assert len(loader_events(tmp_path / "regex", "DataLoaderIter")) == 2
    assert loader_events(tmp_path / "regex", "DataLoaderWorker") == []


def test_a_framework_profile_range_applies_to_all_three_options(tmp_path: Path) -> None:
    plan = plan_of(FrameworkProfile(start_step=3, num_steps=2))
    profiler = FrameworkProfiler(plan, tmp_path, NODE, profile_after_close=False)
    train(profiler, 7)
    profiler.close()

    [trace] = detailed_traces(tmp_path)
    assert profiler_steps(trace) == [3, 4]
    assert [e.args["step_num"] for e in loader_events(tmp_path, "DataLoaderIter")] == ["3", "4"]
    assert sorted({p.start.step for p in step_profiles(tmp_path)}) == [3, 4]


def test_an_individual_config_wins_over_the_range(tmp_path: Path) -> None:
    python = PythonProfilingConfig(start_step=5, num_steps=1)
    plan = plan_of(FrameworkProfile(start_step=1, num_steps=2, python_profiling_config=python))
    profiler = FrameworkProfiler(plan, tmp_path, NODE, profile_after_close=False)
    train(profiler, 7)
    profiler.close()

    assert segments(step_profiles(tmp_path)) == [
        (5, "stepstart", 5, "forwardpassend"),
        (5, "forwardpassend", 6, "stepstart"),
    ]
    assert detailed_traces(tmp_path) == []
    assert loader_events(tmp_path, "DataLoaderIter") == []


def test_a_time_range_profiles_the_steps_that_start_inside_it(tmp_path: Path) -> None:
    start, duration = time.time() + 1.5, 1.5
    plan = plan_of(FrameworkProfile(start_unix_time=start, duration=duration))
    profiler = FrameworkProfiler(plan, tmp_path, NODE, profile_after_close=False)

    def before_step(step: int) -> None:
        # Steps 0-2 before the range, steps from 3 inside it, steps 6-9 after it.
        if step == 3:
            time.sleep(max(0.0, start + 0.05 - time.time()))
        elif step == 6:
            time.sleep(max(0.0, start + duration + 0.05 - time.time()))

    ran = train(profiler, 10, loader=make_loader(batches=10), before_step=before_step)
    profiler.close()

    expected = sorted(s for s, at in ran.started.items() if start <= at < start + duration)
    assert 3 in expected and 9 not in expected
    [trace] = detailed_traces(tmp_path)
    assert profiler_steps(trace) == expected
    waits = loader_events(tmp_path, "DataLoaderIter")
    assert [int(e.args["step_num"]) for e in waits] == expected
    assert sorted({p.start.step for p in step_profiles(tmp_path)}) == expected


def test_a_time_range_without_a_duration_profiles_one_step(tmp_path: Path) -> None:
    python = PythonProfilingConfig(start_unix_time=time.time())
    plan = plan_of(FrameworkProfile(python_profiling_config=python))
    profiler = FrameworkProfiler(plan, tmp_path, NODE, profile_after_close=False)
    train(profiler, 4, loader=make_loader(num_workers=0))
    profiler.close()

    assert sorted({p.start.step for p in step_profiles(tmp_path)}) == [0]


@pytest.mark.skipif(
    importlib.util.find_spec("pyinstrument") is not None, reason="pyinstrument is installed"
)
def test_pyinstrument_missing_is_said_once_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = PythonProfilingConfig(start_step=1, num_steps=3, python_profiler="pyinstrument")
    plan = plan_of(FrameworkProfile(python_profiling_config=config))
    with caplog.at_level(logging.WARNING, logger="trainprobe"):
        profiler = FrameworkProfiler(plan, tmp_path, NODE)
        ran = train(profiler, 5, loader=make_loader(num_workers=0))
        profiler.close()

    assert ran.train_steps == [0, 1, 2, 3, 4]
    said = [r for r in caplog.records if "Pyinstrument is not installed" in r.message]
    assert len(said) == 1
    assert python_profiles(tmp_path) == []
    assert len(timeline(tmp_path)) > 0  # the rest of the profiling went on


@pytest.mark.slow
def test_pyinstrument_profiles_where_it_is_installed(tmp_path: Path) -> None:
    # The smdebug reference environment has pyinstrument (smdebug depends on it) and torch.
    run_reference(
        "smdebug",
        f"""
        import json, sys
        sys.path.insert(0, {str(REPO / "src")!r})
        import torch
        from trainprobe.capture.pytorch.profiling import FrameworkProfiler
        from trainprobe.config.framework_profile import FrameworkProfile
        from trainprobe.config.metrics_config import PythonProfilingConfig
        from trainprobe.config.profiler_config import ProfilerConfig
        from trainprobe.storage.modes import ModeKeys
        config = PythonProfilingConfig(start_step=1, num_steps=1, python_profiler="pyinstrument")
        profile = FrameworkProfile(python_profiling_config=config)
        plan = ProfilerConfig(framework_profile_params=profile).profiling_plan()
        profiler = FrameworkProfiler(plan, {str(tmp_path)!r}, "0-algo-1", profile_after_close=False)
        model = torch.nn.Linear(4, 2)
        profiler.register_module(model)
        profiler.set_mode(ModeKeys.TRAIN)
        for _ in range(3):
            model(torch.randn(3, 4)).sum().backward()
        profiler.close()
        print(json.dumps("done"))
        """,
    )
    found = [
        [
            p.profiler,
            p.start.mode,
            p.start.step,
            p.start.phase,
            sorted(f.name for f in p.directory.iterdir()),
            p.directory,
        ]
        for p in python_profiles(tmp_path)
    ]
    assert isinstance(found, list)
    assert [row[:4] for row in found] == [
        ["pyinstrument", "prestepzero", None, "start"],
        ["pyinstrument", "train", 1, "stepstart"],
        ["pyinstrument", "train", 1, "forwardpassend"],
    ]
    for *_, names, directory in found:
        assert names == ["python_stats.html", "python_stats.json"]
        json.loads((directory / "python_stats.json").read_text())
        assert "<html" in (directory / "python_stats.html").read_text().lower()


@pytest.mark.slow
def test_smdebug_reads_the_cprofile_profiles_beside_their_clock_files(tmp_path: Path) -> None:
    config = PythonProfilingConfig(start_step=1, num_steps=2, cprofile_timer="cpu")
    plan = plan_of(FrameworkProfile(python_profiling_config=config))
    profiler = FrameworkProfiler(plan, tmp_path, NODE, profile_after_close=False)
    train(profiler, 4, model=Net(spin=0.01), loader=make_loader(num_workers=0))
    profiler.close()
    profiles = python_profiles(tmp_path)
    assert {(p.directory / "cprofile_timer").read_text() for p in profiles} == {"cpu_time\n"}

    profile_dir = tmp_path / "framework" / "pytorch" / "cprofile"
    read = run_reference(
        "smdebug",
        f"""
        import json
        from smdebug.profiler.analysis.python_profile_analysis import cProfileAnalysis
        analysis = cProfileAnalysis(local_profile_dir={str(profile_dir)!r})
        stats = analysis.python_profile_stats
        steps = analysis.fetch_profile_stats_by_step(1, 3)
        functions = [f.function_name for f in steps.function_stats_list]
        print(json.dumps({{
            "files": sorted(s.stats_path.rsplit("/", 2)[1] + "/" + s.stats_path.rsplit("/", 1)[1]
                            for s in stats),
            "spins": any("spin_a_while" in name for name in functions),
        }}))
        """,
    )
    assert read == {
        "files": sorted(f"{p.directory.name}/python_stats" for p in profiles),
        "spins": True,
    }


@pytest.mark.slow
def test_a_last_profile_runs_from_close_to_the_end_of_the_process(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from framework_training import make_loader, plan_of, train
        from trainprobe.capture.pytorch.profiling import FrameworkProfiler
        from trainprobe.config.framework_profile import FrameworkProfile
        from trainprobe.config.metrics_config import PythonProfilingConfig

        def save_the_model():
            return sum(range(1000))

        config = PythonProfilingConfig(start_step=1, num_steps=1)
        plan = plan_of(FrameworkProfile(python_profiling_config=config))
        profiler = FrameworkProfiler(plan, {str(tmp_path)!r}, "0-algo-1")
        train(profiler, 2, loader=make_loader(num_workers=0))
        profiler.close()
        save_the_model()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)

    last = python_profiles(tmp_path)[-1]
    assert (last.start.mode, last.start.step, last.start.phase) == ("posthookclose", None, "end")
    assert (last.end.mode, last.end.step, last.end.phase) == ("posthookclose", None, "end")
    stats = pstats.Stats(str(last.directory / "python_stats"))
    assert any(key[2] == "save_the_model" for key in stats.stats)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_workers_started_by_spawn_report_their_fetches_and_keep_their_init(
    tmp_path: Path,
) -> None:
    config = DataloaderProfilingConfig(start_step=2, num_steps=2)
    plan = plan_of(FrameworkProfile(dataloader_profiling_config=config))
    profiler = FrameworkProfiler(plan, tmp_path, NODE)
    model = Net(pause=0.02)
    profiler.register_module(model)
    loader = DataLoader(
        WorkerMarkedDataset(96),
        batch_size=8,
        num_workers=2,
        multiprocessing_context="spawn",
        worker_init_fn=mark_worker,
    )
    marks = set()
    for inputs, worker_marks in loader:
        model(inputs)
        marks |= set(worker_marks.tolist())
    profiler.close()

    assert marks == {0, 1}  # the user's worker_init_fn still ran in each worker
    assert loader.worker_init_fn is mark_worker
    [start] = loader_events(tmp_path, "DataLoaderIterInitialize")
    workers = loader_events(tmp_path, "DataLoaderWorker")
    assert workers and {e.args["pid"] for e in workers} <= set(start.args["worker_pids"])
    assert [e.args["step_num"] for e in loader_events(tmp_path, "DataLoaderIter")] == ["2", "3"]
