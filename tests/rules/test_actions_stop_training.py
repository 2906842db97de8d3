"""StopTraining end to end: a real PyTorch training script with the trainprobe hook runs as a
subprocess, ``trainprobe rules run`` follows it from another process, and when the rule finds
the NaN the script injects, the training stops with a message naming the rule.

The training checks for the stop request through ``StopRequestWatch`` at each step start. Until
the hook does that itself (it will expose its watch as ``hook.stop_watch``), the script makes
the same call before each forward.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainprobe.config.actions import StopTraining
from trainprobe.storage.rule_output import read_actions, read_status
from trainprobe.storage.stop_request import read_stop_request

TRAINING = textwrap.dedent(
    """
    import sys
    import time

    import torch
    from torch import nn

    import trainprobe.pytorch as smd
    from trainprobe.capture.stop_request import StopRequestWatch

    out_dir, bad_step = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(
        out_dir=out_dir,
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["losses", "gradients"],
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    watch = getattr(hook, "stop_watch", None)
    if watch is None:
        watch = StopRequestWatch(out_dir)  # what the hook does at each step start
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    deadline = time.monotonic() + 120
    step = 0
    while time.monotonic() < deadline:
        if getattr(hook, "stop_watch", None) is None:
            watch.raise_if_requested(step)
        inputs = torch.randn(16, 4)
        if step >= bad_step:
            inputs[0, 0] = float("nan")
        labels = torch.randint(0, 2, (16,))
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()
        step += 1
        time.sleep(0.01)
    print("the training ran to its end without being stopped")
    """
)


@pytest.mark.slow
def test_a_rule_stops_a_real_training_started_separately(tmp_path: Path) -> None:
    job = tmp_path / "job"
    out = job / "debug-output"
    script = tmp_path / "train.py"
    script.write_text(TRAINING)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    action = StopTraining().serialize()
    command = ["rules", "run", "ExplodingTensor", "--param", f"action_json={action}"]
    rule = subprocess.Popen(
        [sys.executable, "-m", "trainprobe.cli.main", *command, "--wait", "120", str(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    training = subprocess.run(
        [sys.executable, str(script), str(out), "20"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    rule_out, rule_err = rule.communicate(timeout=300)
    assert rule.returncode == 1, rule_out + rule_err
    assert "ExplodingTensor: IssuesFound" in rule_out
    assert training.returncode != 0, training.stdout
    assert "ran to its end" not in training.stdout
    assert "TrainingStopRequested" in training.stderr
    assert "rule ExplodingTensor found an issue at step" in training.stderr
    request = read_stop_request(str(out))
    assert request is not None and request.rule == "ExplodingTensor"
    assert request.step is not None and request.step >= 20
    directory = job / "rule-output" / "ExplodingTensor"
    status = read_status(str(directory))
    assert status is not None and status.rule_evaluation_status == "IssuesFound"
    assert [(a["action"], a["ok"]) for a in read_actions(str(directory))] == [
        ("stoptraining", True)
    ]
