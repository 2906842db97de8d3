"""The hook where smdebug's users lean on smdebug's behaviour: a profiler configuration file that
smdebug accepted, and the hook's hooks that subclasses and notebooks call."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.trials import create_trial


def train(hook: smd.Hook, steps: int = 3) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3))
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(steps):
        loss_fn(model(torch.ones(2, 4)), torch.tensor([0, 1])).backward()
    hook.close()


def test_a_profiler_file_smdebug_accepted_profiles_and_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Lower-case keys, ProfilerEnabled and a key nobody knows, as SageMaker notebooks wrote them.
    config = {
        "profilerenabled": True,
        "ProfilingParameters": {
            "localpath": str(tmp_path / "profiler"),
            "DataloaderProfilingConfig": '{"StartStep": 1, "NumSteps": 1}',
            "SomethingNew": "1",
        },
        "Unknown": 3,
    }
    path = tmp_path / "profilerconfig.json"
    path.write_text(json.dumps(config))
    monkeypatch.setenv("SMPROFILER_CONFIG_PATH", str(path))
    with caplog.at_level(logging.INFO, logger="trainprobe"):
        hook = smd.Hook(str(tmp_path / "tensors"), save_config=smd.SaveConfig(save_interval=1))
        hook.record_trace_events(time.time(), "DataLoading", "my_own_loader", duration=0.01)
        train(hook)
    assert hook.profiler is not None and hook.profiler.active is False  # closed
    assert "ProfilingParameters.SomethingNew" in caplog.text and "Unknown" in caplog.text
    traces = list((tmp_path / "profiler").rglob("*.json"))
    assert any("my_own_loader" in trace.read_text() for trace in traces), traces
    assert create_trial(str(tmp_path / "tensors")).steps() == [0, 1, 2]


def test_a_profiler_file_that_cannot_be_used_turns_profiling_off_not_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "profilerconfig.json"
    path.write_text(json.dumps({"ProfilingIntervalInMilliseconds": 7}))
    monkeypatch.setenv("SMPROFILER_CONFIG_PATH", str(path))
    with caplog.at_level(logging.ERROR, logger="trainprobe"):
        hook = smd.Hook(str(tmp_path / "tensors"), save_config=smd.SaveConfig(save_interval=1))
        train(hook)
    assert hook.profiler is None
    assert "framework profiling is off" in caplog.text and "ProfilingIntervalInMilliseconds" in (
        caplog.text
    )
    assert create_trial(str(tmp_path / "tensors")).steps() == [0, 1, 2]


def test_the_timeline_names_the_host_as_the_system_metrics_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainprobe.capture.pytorch.profiling.node import default_node_id

    # A trainprobe job sets SM_CURRENT_HOST to the name its system monitor gives the host.
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-1")
    assert default_node_id() == f"{os.getpid()}-algo-1"
