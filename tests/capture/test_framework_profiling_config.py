"""Where the profiler's configuration comes from, live updates, and failures kept from the training.

The file is a ProfilerConfig request (spec 001: CreateTrainingJob's ProfilerConfig, changed while
the job runs by UpdateTrainingJob); smdebug finds it at ``$SMPROFILER_CONFIG_PATH`` and profiles
only when it has ``ProfilingParameters`` and ``DisableProfiler`` is false (reference/smdebug.md
§1.3).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest
import torch
from framework_training import (
    Net,
    detailed_traces,
    make_loader,
    nothing_left_running,  # noqa: F401 (an autouse fixture)
    python_profiles,
    steps_of,
    timeline,
    train,
    write_config,
)

from timing import FakeClock
from trainprobe.capture.profiler_config_file import ProfilerConfigFile
from trainprobe.capture.pytorch.profiling import FrameworkProfiler
from trainprobe.capture.pytorch.profiling.framework_profiler import framework_plan
from trainprobe.config.errors import ConfigErrors
from trainprobe.config.framework_profile import FrameworkProfile
from trainprobe.config.metrics_config import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    PythonProfilingConfig,
)
from trainprobe.config.profiler_config import ProfilerConfig

NODE = "0-algo-1"


def far_away() -> ProfilerConfig:
    """Framework profiling on, with its only option far in the future: the timeline alone."""
    later = DetailedProfilingConfig(start_step=100_000)
    return ProfilerConfig(
        framework_profile_params=FrameworkProfile(detailed_profiling_config=later)
    )


def test_a_rewritten_config_file_takes_effect_at_the_next_step(tmp_path: Path) -> None:
    path = tmp_path / "profilerconfig.json"
    write_config(path, far_away())
    out = tmp_path / "out"
    profiler = FrameworkProfiler(path, out, NODE, check_interval=0.0, profile_after_close=False)
    updates = {
        4: ProfilerConfig(
            framework_profile_params=FrameworkProfile(
                dataloader_profiling_config=DataloaderProfilingConfig(start_step=5),
                python_profiling_config=PythonProfilingConfig(start_step=6, num_steps=2),
            )
        ),
        9: ProfilerConfig(disable_profiler=True),
        12: far_away(),
    }

    def before_step(step: int) -> None:
        if step in updates:
            write_config(path, updates[step])

    ran = train(profiler, 14, loader=make_loader(batches=14), before_step=before_step)
    profiler.close()

    assert ran.train_steps == list(range(14))
    events = timeline(out)
    assert steps_of(events) == [*range(9), 12, 13]  # nothing while profiling was disabled
    profiled = sorted({p.start.step for p in python_profiles(out)})
    assert profiled == [6, 7]
    waits = [e.args["step_num"] for e in events if e.phase == "DataLoaderIter"]
    assert waits == ["5"]
    assert detailed_traces(out) == []


def test_the_file_is_checked_at_most_every_check_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "profilerconfig.json"
    write_config(path, far_away())
    clock = FakeClock()
    watch = ProfilerConfigFile(str(path), framework_plan, check_interval=0.5, clock=clock)
    assert watch.read().detailed is not None

    python = PythonProfilingConfig(start_step=3)
    write_config(
        path,
        ProfilerConfig(framework_profile_params=FrameworkProfile(python_profiling_config=python)),
    )
    clock.now = 0.4
    assert watch.changed() is None  # too soon to look
    clock.now = 0.5
    plan = watch.changed()
    assert plan is not None and plan.python is not None and plan.detailed is None
    clock.now = 1.0
    assert watch.changed() is None  # unchanged since read

    path.write_text('{"DisableProfiler": "no"}')
    with caplog.at_level(logging.WARNING, logger="trainprobe"):
        clock.now = 2.0
        assert watch.changed() is None  # an invalid file keeps the plan as it was
        clock.now = 3.0
        assert watch.changed() is None
    warnings = [r for r in caplog.records if "ignoring" in r.message]
    assert len(warnings) == 1 and "DisableProfiler" in warnings[0].message


@pytest.mark.parametrize(
    "config",
    [ProfilerConfig(), ProfilerConfig(disable_profiler=True)],
    ids=["system monitoring only", "DisableProfiler"],
)
def test_a_config_without_framework_profiling_writes_nothing(
    tmp_path: Path, config: ProfilerConfig
) -> None:
    path = tmp_path / "profilerconfig.json"
    write_config(path, config)
    profiler = FrameworkProfiler(path, tmp_path / "out", NODE)
    ran = train(profiler, 3)
    profiler.close()

    assert not profiler.active and ran.train_steps == [0, 1, 2]
    assert not (tmp_path / "out").exists()


def test_the_environment_names_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, smdebugs = tmp_path / "ours.json", tmp_path / "smdebugs.json"
    write_config(ours, far_away())
    write_config(smdebugs, ProfilerConfig(disable_profiler=True))
    monkeypatch.delenv("TRAINPROBE_PROFILER_CONFIG", raising=False)
    monkeypatch.delenv("SMPROFILER_CONFIG_PATH", raising=False)
    if not os.path.exists("/opt/ml/input/config/profilerconfig.json"):
        assert FrameworkProfiler.from_environment(tmp_path / "out") is None

    monkeypatch.setenv("SMPROFILER_CONFIG_PATH", str(smdebugs))
    profiler = FrameworkProfiler.from_environment(tmp_path / "out", NODE)
    assert profiler is not None and not profiler.active
    profiler.close()

    monkeypatch.setenv("TRAINPROBE_PROFILER_CONFIG", str(ours))
    profiler = FrameworkProfiler.from_environment(tmp_path / "out", NODE)
    assert profiler is not None and profiler.active and profiler.plan.detailed is not None
    profiler.close()


def test_the_config_file_s_local_path_is_the_default_output(tmp_path: Path) -> None:
    path = tmp_path / "profilerconfig.json"
    profile = FrameworkProfile(local_path=str(tmp_path / "profiler-output"))
    write_config(path, ProfilerConfig(framework_profile_params=profile))
    profiler = FrameworkProfiler(path, node_id=NODE, profile_after_close=False)
    train(profiler, 2, loader=make_loader(num_workers=0))
    profiler.close()

    assert steps_of(timeline(tmp_path / "profiler-output")) == [0, 1]


def test_an_invalid_config_is_refused_before_training(tmp_path: Path) -> None:
    path = tmp_path / "profilerconfig.json"
    request = {"ProfilingParameters": {"DetailedProfilingConfig": '{"StartStep": -1}'}}
    path.write_text(json.dumps(request))

    with pytest.raises(ConfigErrors) as raised:
        FrameworkProfiler(path, tmp_path / "out", NODE)
    assert "DetailedProfilingConfig.StartStep" in str(raised.value)
    with pytest.raises(ValueError, match="node_id"):
        FrameworkProfiler(ProfilerConfig().profiling_plan(), tmp_path / "out", "0_algo_1")


def test_profiling_that_cannot_write_never_stops_the_training(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("where the output directory should be")
    profile = FrameworkProfile(
        file_open_fail_threshold=3,
        detailed_profiling_config=DetailedProfilingConfig(start_step=1),
        dataloader_profiling_config=DataloaderProfilingConfig(start_step=1),
        python_profiling_config=PythonProfilingConfig(start_step=2),
    )
    plan = ProfilerConfig(framework_profile_params=profile).profiling_plan()
    with caplog.at_level(logging.ERROR, logger="trainprobe"):
        profiler = FrameworkProfiler(plan, blocker / "out", NODE, profile_after_close=False)
        ran = train(profiler, 6, model=Net())
        profiler.close()

    assert ran.train_steps == list(range(6))
    messages = [r.message for r in caplog.records]
    assert len([m for m in messages if "cannot open a trace file" in m]) == 1
    assert len([m for m in messages if m.startswith("trainprobe: detailed profiling failed")]) == 1
    assert len([m for m in messages if m.startswith("trainprobe: Python profiling failed")]) == 1
    assert sys.getprofile() is None  # cProfile is not left running
    assert not torch.autograd.profiler._is_profiler_enabled  # nor torch.profiler
