"""``trainprobe.profiler`` on files written in the real formats by the storage writers, for what a
short training on one CPU machine cannot show: several hosts and ranks, GPU rows, smdebug's
timelines (``step_num`` only), Pyinstrument and clock-mixing profiles, a torch.profiler trace
with text process ids, and bad questions.

Step times are laid out by the tests themselves, so the expected step of each moment is known.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from trainprobe.capture.pytorch.profiling.python_profiling import PythonProfiling
from trainprobe.config.errors import ConfigError
from trainprobe.config.framework_profile import FrameworkProfile
from trainprobe.config.metrics_config import PythonProfiler, PythonProfilingConfig, cProfileTimer
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.profiler import ProfilerData, merge_timeline
from trainprobe.storage.locations import join
from trainprobe.storage.system_metrics import MetricKey, SystemMetricsWriter
from trainprobe.storage.trace_file import ProfilePoint, TraceFileWriter, detailed_profiling_file

T0 = 1_800_000_000.0  # seconds since the epoch, the start of a minute
US = 1e6


@dataclass(frozen=True)
class Step:
    """A step laid out by a test: node, mode, global and mode step, wait start, start, end (s)."""

    node_id: str
    mode: str
    step: int
    mode_step: int
    wait: float
    start: float
    end: float


def layout() -> list[Step]:
    steps = []
    for i in range(5):  # rank 0 on algo-1: a 0.1 s wait, then a 0.7 s step, every second
        steps.append(Step("0-algo-1", "TRAIN", i, i, T0 + i + 0.1, T0 + i + 0.2, T0 + i + 0.9))
    for i in range(5):  # rank 1 on algo-1, half a second later: not what algo-1's samples get
        steps.append(Step("1-algo-1", "TRAIN", i, i, T0 + i + 0.5, T0 + i + 0.5, T0 + i + 1.2))
    for i in range(3):  # rank 2 on algo-2: slower steps, then one eval step
        steps.append(Step("2-algo-2", "TRAIN", i, i, T0 + 2 * i, T0 + 2 * i, T0 + 2 * i + 1.5))
    steps.append(Step("2-algo-2", "EVAL", 3, 0, T0 + 6.0, T0 + 6.25, T0 + 7.0))
    return steps


def write_timeline(out: Path, steps: list[Step]) -> None:
    """The framework profiler's files for ``steps``: step, forward and data wait events."""
    for node_id in sorted({s.node_id for s in steps}):
        writer = TraceFileWriter(str(out), node_id, start_time_us=T0 * US)
        for s in (s for s in steps if s.node_id == node_id):
            args = {"step_num": str(s.mode_step), "global_step": s.step, "mode": s.mode, "pid": 7}
            if s.wait < s.start:
                writer.add(
                    "DataLoading", "Iter::GetNext", s.wait * US, (s.start - s.wait) * US, args
                )
            writer.add("Forward", "Net", s.start * US, 0.3 * US, args)
            phase = f"Step:ModeKeys.{s.mode}"
            writer.add(phase, phase, s.start * US, (s.end - s.start) * US, args)
            writer.add(
                "DataLoaderWorker", "DataLoaderWorker::fetch", s.start * US, 1000.0, {"pid": 99}
            )
        writer.close()


def sample_times() -> list[float]:
    return [T0 + k / 4 for k in range(30)]  # every 250 ms over 7.5 s


def write_system(out: Path) -> None:
    """algo-1 with two cores; algo-2 with a core and two GPUs."""
    algo1 = SystemMetricsWriter(str(out), "algo-1")
    algo2 = SystemMetricsWriter(str(out), "algo-2")
    for k, at in enumerate(sample_times()):
        algo1.write(
            at,
            [
                (MetricKey("cpu", "cpu0", "CPUUtilization"), 10.0 + k),
                (MetricKey("cpu", "cpu1", "CPUUtilization"), 20.0 + k),
                (MetricKey("memory", "MemoryUsedPercent", ""), 40.0),
            ],
        )
        algo2.write(
            at,
            [
                (MetricKey("cpu", "cpu0", "CPUUtilization"), 50.0),
                (MetricKey("gpu", "gpu0", "GPUUtilization"), 90.0 - k),
                (MetricKey("gpu", "gpu1", "GPUUtilization"), 80.0 - k),
                (MetricKey("accelerator", "gpu0", "GPUPowerWatts"), 250.0),
            ],
        )
    algo1.close()
    algo2.close()


def expected_step(steps: list[Step], node_id: str, at: float) -> Step | None:
    found = [s for s in steps if s.node_id == node_id and s.wait <= at < s.end]
    assert len(found) <= 1
    return found[0] if found else None


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    out = tmp_path / "profiler-output"
    write_timeline(out, layout())
    write_system(out)
    return out


def test_each_host_s_samples_get_the_steps_of_its_lowest_rank(cluster: Path) -> None:
    frame = ProfilerData(cluster).system_metrics()
    assert len(frame) == 30 * 3 + 30 * 4
    steps = layout()
    for row in frame.itertuples():
        rank = "0-algo-1" if row.node_id == "algo-1" else "2-algo-2"
        assert row.step_node_id == rank
        expected = expected_step(steps, rank, row.timestamp_us / US)
        if expected is None:
            assert pd.isna(row.step) and pd.isna(row.mode), row
        else:
            assert (row.step, row.mode, row.mode_step) == (
                expected.step,
                expected.mode,
                expected.mode_step,
            ), row
    # A sample in rank 0's data wait belongs to the step that waited (T0 + 1.15: step 1).
    wait = frame[(frame["node_id"] == "algo-1") & (frame["timestamp_us"] == (T0 + 1.25) * US)]
    assert set(wait["step"]) == {1}


def test_gpu_rows_come_back_with_their_steps(cluster: Path) -> None:
    frame = ProfilerData(cluster).system_metrics(node_id="algo-2")
    gpus = frame[frame["type"] == "gpu"]
    assert sorted(set(gpus["name"])) == ["gpu0", "gpu1"]
    assert set(gpus["dimension"]) == {"GPUUtilization"}
    power = frame[(frame["type"] == "accelerator") & (frame["dimension"] == "GPUPowerWatts")]
    assert len(power) == 30
    during_eval = gpus[gpus["mode"] == "EVAL"]
    assert set(during_eval["step"]) == {3} and set(during_eval["mode_step"]) == {0}
    assert during_eval["timestamp_us"].between(T0 * US + 6.0 * US, T0 * US + 7.0 * US).all()


def test_step_durations_come_per_node_and_mode(cluster: Path) -> None:
    data = ProfilerData(cluster)
    steps = data.steps()
    assert len(steps) == len(layout())
    for s in layout():
        [row] = steps[(steps["node_id"] == s.node_id) & (steps["step"] == s.step)].itertuples()
        assert row.mode == s.mode and row.mode_step == s.mode_step
        assert row.duration_us == pytest.approx((s.end - s.start) * US, abs=1)
        assert row.wait_us == pytest.approx((s.start - s.wait) * US, abs=1)
    stats = data.step_stats().set_index(["node_id", "mode"])
    assert stats.loc[("2-algo-2", "TRAIN"), "count"] == 3
    assert stats.loc[("2-algo-2", "EVAL"), "max_us"] == pytest.approx(0.75 * US)
    assert stats.loc[("0-algo-1", "TRAIN"), "mean_us"] == pytest.approx(0.7 * US)
    assert data.steps(mode="EVAL")["node_id"].tolist() == ["2-algo-2"]


def test_a_step_range_selects_each_node_s_own_steps(cluster: Path) -> None:
    data = ProfilerData(cluster)
    events = data.framework_events(start_step=1, end_step=3)
    steps = events[events["phase"] == "Step:ModeKeys.TRAIN"]
    assert sorted(zip(steps["node_id"], steps["step"], strict=True)) == [
        (node, step) for node in ("0-algo-1", "1-algo-1", "2-algo-2") for step in (1, 2)
    ]
    # Events that name no step (a worker's fetch) get the step running on their node.
    workers = events[events["phase"] == "DataLoaderWorker"]
    assert len(workers) == 6 and set(workers["pid"]) == {99}
    assert set(events["host"]) == {"algo-1", "algo-2"}
    readings = data.system_metrics(start_step=1, end_step=3, node_id="algo-2")
    for at in readings["timestamp_us"] / US:
        assert expected_step(layout(), "2-algo-2", at).step in (1, 2)  # type: ignore[union-attr]
    assert len(readings) == 4 * 12  # 1.5 s steps at 250 ms samples, two of them, four rows each


SMDEBUG_NODE = "19853-vm"


@pytest.fixture
def smdebug_job(tmp_path: Path) -> Path:
    """smdebug's timeline (GLOBAL steps, ``step_num`` only, a pid-named node) and one host."""
    out = tmp_path / "profiler-output"
    writer = TraceFileWriter(str(out), SMDEBUG_NODE, start_time_us=T0 * US)
    for i in range(4):
        args = {"pid": 19853, "step_num": str(i)}
        start = (T0 + i) * US
        writer.add("Step:ModeKeys.GLOBAL", "Step:ModeKeys.GLOBAL", start, 0.8 * US, args)
        writer.add("Forward-SubModuleInternal", "1", start + 0.1 * US, 340.0, args)
    writer.close()
    system = SystemMetricsWriter(str(out), "algo-1")
    for at in sample_times()[:16]:
        system.write(at, [(MetricKey("cpu", "cpu0", "CPUUtilization"), 5.0)])
    system.close()
    return out


def test_smdebug_timelines_are_read_by_step_num_on_a_single_host(smdebug_job: Path) -> None:
    data = ProfilerData(smdebug_job)
    assert data.steps()["step"].tolist() == [0, 1, 2, 3]
    assert set(data.steps()["mode"]) == {"GLOBAL"}
    frame = data.system_metrics()
    assert set(frame["step_node_id"]) == {SMDEBUG_NODE}
    for row in frame.itertuples():
        offset = row.timestamp_us / US - T0
        expected = int(offset) if offset - int(offset) < 0.8 else None
        assert (row.step if not pd.isna(row.step) else None) == expected, row
    forwards = data.framework_events(phase="Forward-SubModuleInternal", start_step=2, end_step=3)
    assert forwards["step"].tolist() == [2] and forwards["mode"].tolist() == ["GLOBAL"]


def test_hosts_place_a_process_the_names_do_not(smdebug_job: Path) -> None:
    elsewhere = ProfilerData(smdebug_job, hosts={SMDEBUG_NODE: "algo-2"}).system_metrics()
    assert elsewhere["step"].isna().all() and elsewhere["step_node_id"].isna().all()
    events = ProfilerData(smdebug_job, hosts={SMDEBUG_NODE: "algo-2"}).framework_events()
    assert set(events["host"]) == {"algo-2"}


def crunch(rounds: int) -> int:
    total = 0
    for number in range(rounds):
        total += number * number % 7
    return total


def recurse(depth: int) -> int:
    """Calls itself ``depth`` times, then crunches numbers."""
    return crunch(200_000) if depth == 0 else recurse(depth - 1)


def write_profiles(out: Path, profiler: PythonProfiler, steps: list[int]) -> None:
    """Real profiles, as the framework profiler takes them: step start to forward end."""
    plan = ProfilerConfig(
        framework_profile_params=FrameworkProfile(
            python_profiling_config=PythonProfilingConfig(
                start_step=9, num_steps=3, python_profiler=profiler, cprofile_timer="default"
            )
        )
    ).profiling_plan()
    profiling = PythonProfiling(str(out), "0-algo-1")
    for step in steps:
        profiling.start(
            ProfilePoint("train", step, "stepstart", time.time() * US),
            profiler,
            plan.python_timer_at(step),
        )
        crunching = time.perf_counter()
        recurse(5)
        # Off the CPU for a quarter of the crunch's wall time, however fast this machine is:
        # crunch stays first by wall clock too.
        time.sleep((time.perf_counter() - crunching) / 4)
        profiling.stop(ProfilePoint("train", step, "forwardpassend", time.time() * US))


DEFAULT_TIMERS = ProfilerConfig(
    framework_profile_params=FrameworkProfile(
        python_profiling_config=PythonProfilingConfig(
            start_step=9, num_steps=3, cprofile_timer=cProfileTimer.DEFAULT
        )
    )
)


def test_cprofile_profiles_tell_their_clock_and_clocks_are_not_added_up(tmp_path: Path) -> None:
    write_profiles(tmp_path, PythonProfiler.CPROFILE, [9, 10, 11])
    data = ProfilerData(tmp_path)
    listing = data.python_profiles_frame()
    # Each profile's clock is written beside it: no plan is needed to know it.
    assert listing["timer"].tolist() == ["total_time", "cpu_time", "off_cpu_time"]
    assert listing["start_step"].tolist() == [9, 10, 11]
    with pytest.raises(ConfigError) as mixed:
        data.top_functions(9, 12)
    assert mixed.value.field == "timer"
    by_cpu = data.top_functions(9, 12, timer="cpu_time", by="own", limit=3)
    assert by_cpu["function"].iloc[0] == "crunch"
    assert by_cpu["calls"].iloc[0] == 1


def test_the_written_cprofile_clock_wins_over_the_plan(tmp_path: Path) -> None:
    write_profiles(tmp_path, PythonProfiler.CPROFILE, [9, 10, 11])
    plan = ProfilerConfig(
        framework_profile_params=FrameworkProfile(
            python_profiling_config=PythonProfilingConfig(
                start_step=9, num_steps=3, cprofile_timer=cProfileTimer.CPU_TIME
            )
        )
    )
    listing = ProfilerData(tmp_path, plan=plan).python_profiles_frame()
    assert listing["timer"].tolist() == ["total_time", "cpu_time", "off_cpu_time"]


def test_profiles_without_a_clock_file_take_the_plans_or_none(tmp_path: Path) -> None:
    # As smdebug wrote them: no cprofile_timer beside python_stats. One file names no clock.
    write_profiles(tmp_path, PythonProfiler.CPROFILE, [9, 10, 11])
    timer_files = sorted(tmp_path.glob("framework/pytorch/cprofile/*/*/cprofile_timer"))
    assert len(timer_files) == 3
    for timer_file in timer_files[:2]:
        timer_file.unlink()
    timer_files[2].write_text("wall_clock\n")

    with_plan = ProfilerData(tmp_path, plan=DEFAULT_TIMERS).python_profiles_frame()
    assert with_plan["timer"].tolist() == ["total_time", "cpu_time", "off_cpu_time"]
    assert ProfilerData(tmp_path).python_profiles_frame()["timer"].isna().all()


def test_pyinstrument_profiles_give_own_and_cumulative_time(tmp_path: Path) -> None:
    pytest.importorskip("pyinstrument")
    write_profiles(tmp_path, PythonProfiler.PYINSTRUMENT, [9, 10])
    data = ProfilerData(tmp_path)
    [first, _] = data.python_profiles()
    assert first.profiler == "pyinstrument" and first.timer is None
    assert first.html_file is not None and Path(first.html_file).exists()
    own = data.top_functions(9, 11, by="own", limit=1)
    assert own["function"].tolist() == ["crunch"] and own["calls"].isna().all()
    cumulative = data.profile_functions(first).set_index("function")
    # recurse calls itself six deep: its time is counted once, not once per level.
    assert cumulative.loc["recurse", "cumulative_s"] <= first.duration_us / US
    assert cumulative.loc["recurse", "cumulative_s"] >= cumulative.loc["crunch", "cumulative_s"]
    assert data.top_functions(9, 11, profiler="pyinstrument")["cumulative_s"].max() > 0


def write_detailed_trace(out: Path) -> tuple[Path, float]:
    """A torch.profiler trace in PyTorch 2's shape: text pids, times after a base."""
    base_ns = int((T0 + 1.0) * 1e9)
    events = [
        {
            "ph": "M",
            "name": "process_name",
            "ts": 0,
            "pid": 4242,
            "tid": 0,
            "args": {"name": "python"},
        },
        {
            "ph": "M",
            "name": "thread_name",
            "ts": 0,
            "pid": 4242,
            "tid": 4242,
            "args": {"name": "main"},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::addmm",
            "pid": 4242,
            "tid": 4242,
            "ts": 300000.0,
            "dur": 50.0,
            "args": {"Input Dims": [[8, 16]]},
        },
        {
            "ph": "X",
            "name": "ProfilerStep#1",
            "pid": 4242,
            "tid": 4242,
            "ts": 250000.0,
            "dur": 600000.0,
        },
        {
            "ph": "i",
            "s": "t",
            "name": "[memory]",
            "pid": 4242,
            "tid": 4242,
            "ts": 300010.0,
            "args": {"Bytes": 512},
        },
        {"ph": "s", "id": 1, "name": "flow", "pid": 4242, "tid": 4242, "ts": 300000.0},
        {"ph": "f", "id": 1, "bp": "e", "name": "flow", "pid": 4242, "tid": 4242, "ts": 300040.0},
        {
            "ph": "C",
            "name": "memory",
            "pid": 4242,
            "ts": 300020.0,
            "args": {"Allocated": 1024, "device": "cpu"},
        },
        {
            "ph": "X",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 200000.0,
            "dur": 700000.0,
        },
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 900000.0},
    ]
    path = out / detailed_profiling_file("pytorch", 1, (T0 + 1.2) * US, "0-algo-1")
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": base_ns, "traceEvents": events})
    )
    return path, base_ns / 1000


def test_the_merged_timeline_places_a_detailed_trace_and_every_host(cluster: Path) -> None:
    _, base_us = write_detailed_trace(cluster)
    out = cluster.parent / "merged" / "timeline.json"
    written = merge_timeline(cluster, out)
    document = json.loads(out.read_text())
    origin = document["otherData"]["start_time_since_epoch_in_micros"]
    assert origin == written.origin_us
    events = document["traceEvents"]
    for event in events:
        assert isinstance(event["ph"], str) and isinstance(event["ts"], (int, float))
        assert isinstance(event["pid"], int) and isinstance(event.get("tid", 0), int)
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert {"algo-1 system metrics", "algo-2 system metrics"} <= set(names.values())
    assert "0-algo-1 torch.profiler python" in names.values()
    assert "0-algo-1 torch.profiler Spans" in names.values()
    assert "2-algo-2 Step:ModeKeys.EVAL" in names.values()
    gpu = [e for e in events if e["ph"] == "C" and e["name"] == "gpu GPUUtilization"]
    assert len(gpu) == 30 and set(gpu[0]["args"]) == {"gpu0", "gpu1"}
    assert {names[e["pid"]] for e in gpu} == {"algo-2 system metrics"}
    [addmm] = [e for e in events if e["name"] == "aten::addmm"]
    assert origin + addmm["ts"] == pytest.approx(base_us + 300000.0)
    assert addmm["args"] == {"Input Dims": [[8, 16]]}
    [counter] = [
        e for e in events if e["ph"] == "C" and e["name"] == "memory" and "Allocated" in e["args"]
    ]
    assert counter["args"] == {"Allocated": 1024}  # text is not a counter value
    flows = [e for e in events if e["ph"] in ("s", "f")]
    assert len(flows) == 2 and len({e["id"] for e in flows}) == 1
    steps = [e for e in events if e["ph"] == "X" and e["name"].startswith("Step:")]
    assert len(steps) == len(layout())


def test_a_merged_step_range_leaves_out_a_trace_outside_it(cluster: Path) -> None:
    write_detailed_trace(cluster)
    out = cluster.parent / "late.json"
    merge_timeline(cluster, out, start_step=3, end_step=5)
    events = json.loads(out.read_text())["traceEvents"]
    assert not [e for e in events if e["name"] == "aten::addmm"]
    steps = {(e["args"]["global_step"]) for e in events if e["name"].startswith("Step:")}
    assert steps == {3, 4}


def test_an_empty_output_gives_empty_frames_and_an_empty_timeline(tmp_path: Path) -> None:
    data = ProfilerData(tmp_path)
    assert data.system_metrics().empty
    assert list(data.system_metrics().columns)[:2] == ["timestamp_us", "node_id"]
    assert data.framework_events().empty and data.steps().empty
    assert data.python_profiles() == [] and data.top_functions().empty
    written = data.merge_timeline(tmp_path / "empty.json")
    assert json.loads((tmp_path / "empty.json").read_text())["traceEvents"] == []
    assert written.counter_events == written.framework_events == 0


@pytest.mark.parametrize(
    ("call", "field", "suggestion"),
    [
        (lambda d: d.system_metrics(1.0, start_step=2), "start_step", None),
        (lambda d: d.framework_events(start_step=5, end_step=2), "end_step", None),
        (lambda d: d.framework_events(10.0, 5.0), "end_us", None),
        (lambda d: d.system_metrics(start_step=-1), "start_step", None),
        (lambda d: d.steps(start_step=2.0), "start_step", "2"),
        (lambda d: d.steps(mode="trian"), "mode", "TRAIN"),
        (lambda d: d.system_metrics(node_id="algo1"), "node_id", "algo-1"),
        (lambda d: d.framework_events(node_id="0-algo1"), "node_id", "0-algo-1"),
        (lambda d: d.top_functions(by="owm"), "by", "own"),
        (lambda d: d.top_functions(limit=0), "limit", None),
        (lambda d: d.top_functions(profiler="cprofiler"), "profiler", "cprofile"),
        (lambda d: d.merge_timeline(d.path + "/x.json", start_step=50), "start_step", None),
    ],
)
def test_bad_questions_name_the_field_and_what_is_allowed(
    cluster: Path, call: object, field: str, suggestion: str | None
) -> None:
    with pytest.raises(ConfigError) as error:
        call(ProfilerData(cluster))  # type: ignore[operator]
    assert error.value.field == field
    assert error.value.suggestion == suggestion
    assert not Path(join(str(cluster), "x.json")).exists()
