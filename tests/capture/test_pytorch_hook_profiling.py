"""One hook, both jobs: with a ProfilerConfig file in the environment, the tensor hook also
profiles the framework (as SageMaker's hook does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trainprobe.storage.trace_file import TraceFileReader
from trainprobe.trials import create_trial

SCRIPT = """
import sys
import torch
from torch import nn
import trainprobe.pytorch as tp

out = sys.argv[1]
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
hook = tp.Hook(out_dir=out, save_config=tp.SaveConfig(save_interval=2))
hook.register_module(model)
hook.register_loss(loss_fn)
for step in range(8):
    if step == 6:
        hook.set_mode(tp.modes.EVAL)
    loss = loss_fn(model(torch.randn(4, 8)), torch.randint(0, 2, (4,)))
    if step < 6:
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
hook.close()
"""


def run(tmp_path: Path, profiler_config: dict | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SMPROFILER_CONFIG_PATH",)}
    env.pop("TRAINPROBE_PROFILER_CONFIG", None)
    if profiler_config is not None:
        path = tmp_path / "profilerconfig.json"
        path.write_text(json.dumps(profiler_config))
        env["TRAINPROBE_PROFILER_CONFIG"] = str(path)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "debug-output")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_a_profiler_config_makes_the_hook_write_a_step_timeline(tmp_path: Path) -> None:
    profiler_output = tmp_path / "profiler-output"
    config = {
        "ProfilingIntervalInMilliseconds": 500,
        "ProfilingParameters": {"LocalPath": str(profiler_output)},
    }
    result = run(tmp_path, config)
    assert result.returncode == 0, result.stderr
    events = TraceFileReader(str(profiler_output)).events(0, float("inf"))
    steps = [event for event in events if event.name.startswith("Step:ModeKeys")]
    assert len(steps) == 8
    assert {event.name for event in steps} == {"Step:ModeKeys.GLOBAL", "Step:ModeKeys.EVAL"}
    # The tensors are saved as before.
    assert create_trial(str(tmp_path / "debug-output")).steps() == [0, 2, 4, 6]


def test_without_a_profiler_config_nothing_is_profiled(tmp_path: Path) -> None:
    result = run(tmp_path, None)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "profiler-output").exists()
    assert create_trial(str(tmp_path / "debug-output")).steps() == [0, 2, 4, 6]
