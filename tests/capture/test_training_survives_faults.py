"""The training never dies of trainprobe: each fault in what the hook reads is logged once, the
failing part turns itself off, and a real PyTorch training runs to its end with exit status 0.

Each test starts a small training in a subprocess, as a job starts it (``training_entry`` with
the hook installed automatically) or as a script that makes its own hook from the
configuration file, with one fault: a bad hook configuration, an unusable output path, a stop
request that is not valid, a ProfilerConfig that cannot be used.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from trainprobe.capture.stop_request import StopRequestWatch
from trainprobe.trials import create_trial

STEPS = 6

SCRIPT = f"""
import sys
import torch
from torch import nn

own_hook = "--own-hook" in sys.argv
if own_hook:
    import trainprobe.pytorch as smd
    hook = smd.Hook.create_from_json_file()
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
loss_fn = nn.CrossEntropyLoss()
if own_hook:
    hook.register_module(model)
    hook.register_loss(loss_fn)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
generator = torch.Generator().manual_seed(0)
for step in range({STEPS}):
    inputs = torch.randn(4, 6, generator=generator)
    labels = torch.randint(0, 3, (4,), generator=generator)
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), labels)
    loss.backward()
    optimizer.step()
if own_hook:
    hook.close()
print("trained", step + 1, "steps")
"""

DEEP_JSON = "[" * 100_000 + "]" * 100_000


@dataclass
class Fault:
    """One thing wrong: what it does to the job's files, and what the log must say once."""

    logged: str
    hook_config: Callable[[dict[str, object], Path], object] = lambda config, tmp: config
    stop_request: str | None = None
    profiler_config: str | None = None
    saves: bool = True
    environment: dict[str, str] = field(default_factory=dict)


def _set(key: str, value: object) -> Callable[[dict[str, object], Path], object]:
    def change(config: dict[str, object], tmp: Path) -> object:
        return {**config, key: value}

    return change


def _unwritable(config: dict[str, object], tmp: Path) -> object:
    blocker = tmp / "a-file"
    blocker.write_text("a file where the output directory should go")
    return {**config, "LocalPath": str(blocker / "out")}


FAULTS = {
    "nul-in-local-path": Fault(
        "LocalPath", hook_config=lambda c, tmp: {**c, "LocalPath": f"{tmp}/out\0put"}, saves=False
    ),
    "unwritable-local-path": Fault("writable", hook_config=_unwritable, saves=False),
    "bad-hook-parameter": Fault(
        "save_interval",
        hook_config=_set("HookParameters", {"save_interval": "often"}),
        saves=False,
    ),
    "hook-config-not-json": Fault("JSON", hook_config=lambda c, tmp: "{not json", saves=False),
    "hook-config-deep-json": Fault(
        "cannot be used", hook_config=lambda c, tmp: DEEP_JSON, saves=False
    ),
    "stop-request-time-not-a-number": Fault(
        "stop request", stop_request=json.dumps({"rule": "R", "time": "soon"})
    ),
    "profiler-config-deep-json": Fault("framework profiling is off", profiler_config=DEEP_JSON),
    "profiler-config-bad-value": Fault(
        "ProfilingIntervalInMilliseconds",
        profiler_config=json.dumps({"ProfilingIntervalInMilliseconds": "soon"}),
    ),
}


def run_training(tmp_path: Path, fault: Fault, *, own_hook: bool) -> tuple[str, Path]:
    """Run the training with ``fault``; returns its stderr and its tensor output directory."""
    out = tmp_path / "debug-output"
    out.mkdir()
    config: object = {"LocalPath": str(out), "HookParameters": {"save_interval": "1"}}
    config = fault.hook_config(config, tmp_path)  # type: ignore[arg-type]
    config_file = tmp_path / "debughookconfig.json"
    text = config if isinstance(config, str) else json.dumps(config)
    config_file.write_text(text)
    if fault.stop_request is not None:
        data = fault.stop_request.encode("utf-8", "surrogateescape")
        (out / "stop_request.json").write_bytes(data)
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("SMPROFILER_CONFIG_PATH", "TRAINPROBE_PROFILER_CONFIG", "TRAINPROBE_STRICT")
    }
    environment |= {"TRAINPROBE_HOOK_CONFIG": str(config_file), **fault.environment}
    if fault.profiler_config is not None:
        profiler_file = tmp_path / "profilerconfig.json"
        profiler_file.write_text(fault.profiler_config)
        environment["TRAINPROBE_PROFILER_CONFIG"] = str(profiler_file)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    if own_hook:
        command = [sys.executable, str(script), "--own-hook"]
    else:
        environment["TRAINPROBE_AUTO_HOOK"] = "1"
        command = [sys.executable, "-m", "trainprobe.jobs.processes.training_entry", str(script)]
    finished = subprocess.run(
        command, env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stderr
    assert f"trained {STEPS} steps" in finished.stdout
    return finished.stderr, out


def check(fault: Fault, stderr: str, out: Path) -> None:
    assert stderr.count(fault.logged) == 1, stderr  # logged once
    assert "trainprobe:" in stderr, stderr
    assert "Traceback" not in stderr, stderr
    if fault.saves:
        assert create_trial(str(out), timeout=0).steps() == list(range(STEPS))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_a_script_with_its_own_hook_survives(tmp_path: Path, name: str) -> None:
    fault = FAULTS[name]
    stderr, out = run_training(tmp_path, fault, own_hook=True)
    check(fault, stderr, out)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["nul-in-local-path", "stop-request-time-not-a-number", "profiler-config-deep-json"]
)
def test_a_job_training_with_the_automatic_hook_survives(tmp_path: Path, name: str) -> None:
    fault = FAULTS[name]
    stderr, out = run_training(tmp_path, fault, own_hook=False)
    check(fault, stderr, out)


def test_a_stop_watch_that_cannot_look_turns_itself_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    watch = StopRequestWatch(f"{tmp_path}/out\0put", interval=0)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            watch.raise_if_requested(0)
    assert len([r for r in caplog.records if "stop requests" in r.getMessage()]) == 1


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b'{"rule": "R", "time": "soon"}', id="time-not-a-number"),
        pytest.param(b'{"rule": "R", "time": [1]}', id="time-a-list"),
        pytest.param(DEEP_JSON.encode(), id="deep-json"),
        pytest.param(b"[1, 2, 3]", id="not-an-object"),
        pytest.param(b"\xff\xfe{", id="not-utf8"),
        pytest.param(b'{"rule": "R", "time": 1', id="truncated"),
    ],
)
def test_a_stop_request_that_is_not_valid_is_ignored(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "stop_request.json").write_bytes(content)
    watch = StopRequestWatch(str(tmp_path), interval=0, since=0)
    watch.raise_if_requested(0)  # nothing raised: the training goes on
    assert watch.check() is None


def test_a_valid_stop_request_after_a_bad_one_still_stops(tmp_path: Path) -> None:
    watch = StopRequestWatch(str(tmp_path), interval=0, since=0)
    path = tmp_path / "stop_request.json"
    path.write_text(json.dumps({"rule": "R", "time": "soon"}))
    assert watch.check() is None
    path.write_text(json.dumps({"rule": "R", "message": "loss is NaN", "time": 5.0}))
    os.utime(path, ns=(1, 10**18))  # a new version, whatever the clock's resolution
    found = watch.check()
    assert found is not None and found.rule == "R"
