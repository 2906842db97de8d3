"""``trainprobe ui`` shows jobs whose output is not a local directory written by trainprobe: a
job whose output root is ``s3://`` (a real SeaweedFS server on 127.0.0.1, tests/seaweedfs.py),
and a job whose tensors smdebug 1.0.34's own hook wrote (in its reference environment, a
subprocess). Each is read over the UI's HTTP routes, as the page reads it, and compared with
what the trial reads from the same files."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from job_records import job_in_progress
from ui_process import trainprobe_ui

from reference_envs import run_reference
from trainprobe.jobs import JobStore
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.storage.job_layout import JobLayout
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file
from trainprobe.trials import create_trial

LOSS = "CrossEntropyLoss_output_0"


def _by_mode(chart: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {series["mode"]: series for series in chart["series"]}


def _in_s3(home: Path, s3_url: str, name: str) -> JobLayout:
    """A job record in ``home``'s store whose outputs are under ``s3_url`` (its launch plan,
    which says so, in its local directory), as ``trainprobe run`` leaves one."""
    layout = JobLayout.for_job(name, s3_url, local_root=str(home / "jobs"))
    Path(layout.job_dir).mkdir(parents=True)
    LaunchPlan(name, layout, ["python", "train.py"], layout.job_dir, {}).write()
    JobStore(home / "jobs.sqlite").insert(job_in_progress(name, Path(layout.job_dir)))
    return layout


def test_a_job_with_its_output_in_s3_shows_its_scalars_and_tensors(
    s3_url: str, tmp_path: Path
) -> None:
    layout = _in_s3(tmp_path, s3_url, "in-a-bucket")
    assert layout.debug_output.startswith("s3://")
    collections = {
        "losses": {"include_regex": ["Loss_output"], "tensor_names": [], "save_config": None},
        "weights": {"include_regex": ["^fc"], "tensor_names": [], "save_config": None},
    }
    write_collections_file(layout.debug_output, "worker_0", collections, num_workers=1)
    rng = np.random.default_rng(0)
    for step in range(12):
        mode = ModeKeys.EVAL if step % 4 == 3 else ModeKeys.TRAIN
        with StepWriter(layout.debug_output, step, "worker_0") as writer:
            writer.add(LOSS, np.array(1.0 / (1 + step), np.float32), mode=mode, mode_step=step)
            writer.add(
                "fc.weight", rng.normal(size=(2, 3)).astype(np.float32), mode=mode, mode_step=step
            )

    trial = create_trial(layout.debug_output, timeout=5)
    with trainprobe_ui(tmp_path) as ui:
        summary = ui.get_json("/api/jobs/in-a-bucket")
        assert (summary["step"], summary["framework"]) == (11, "PyTorch")
        [chart] = ui.get_json("/api/jobs/in-a-bucket/scalars")
        assert chart["tensor"] == LOSS
        series = _by_mode(chart)
        for mode in ("TRAIN", "EVAL"):
            steps = trial.steps(mode=ModeKeys[mode])
            globals_ = [trial.global_step(ModeKeys[mode], step) for step in steps]
            assert series[mode]["x"] == globals_
            expected = [float(trial.tensor(LOSS).value(step)) for step in globals_]
            assert series[mode]["mean"] == pytest.approx(expected, rel=1e-3)

        index = ui.get_json("/api/jobs/in-a-bucket/tensors")
        assert index["collections"]["weights"] == ["fc.weight"]
        history = ui.get_json("/api/jobs/in-a-bucket/tensor?name=fc.weight")
        assert history["modes"]["TRAIN"]["steps"] == [s for s in range(12) if s % 4 != 3]
        value = ui.get_json("/api/jobs/in-a-bucket/tensor-value?name=fc.weight&step=5")
        assert value["shape"] == [2, 3]
        assert np.allclose(value["rows"], trial.tensor("fc.weight").value(5), rtol=1e-3)


SMDEBUG_TRAINING = """
import json, os
os.environ["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"
import torch
import torch.nn as nn
import smdebug.pytorch as smd
from smdebug import modes

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
hook = smd.Hook(out_dir={out!r}, save_config=smd.SaveConfig(save_interval=1),
                include_collections=["weights", "gradients", "losses"])
hook.register_module(model)
hook.register_loss(loss_fn)
hook.set_mode(modes.TRAIN)
for _ in range(6):
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    optimizer.step()
hook.set_mode(modes.EVAL)
with torch.no_grad():
    for _ in range(3):
        loss_fn(model(torch.randn(4, 6)), torch.randint(0, 3, (4,)))
hook.close()
print(json.dumps("done"))
"""


@pytest.mark.slow
def test_a_job_written_by_smdebug_shows_its_steps_losses_and_tensors(tmp_path: Path) -> None:
    job_dir = tmp_path / "out" / "by-smdebug"
    debug_output = job_dir / "debug-output"
    run_reference("smdebug", SMDEBUG_TRAINING.format(out=str(debug_output)))
    JobStore(tmp_path / "jobs.sqlite").insert(job_in_progress("by-smdebug", job_dir))
    trial = create_trial(str(debug_output), timeout=0)
    [loss] = trial.tensor_names(collection="losses")

    with trainprobe_ui(tmp_path) as ui:
        summary = ui.get_json("/api/jobs/by-smdebug")
        assert summary["framework"] == "PyTorch"
        assert summary["step"] == trial.steps()[-1]

        [chart] = ui.get_json("/api/jobs/by-smdebug/scalars")
        assert chart["tensor"] == loss
        series = _by_mode(chart)
        assert set(series) == {"TRAIN", "EVAL"}
        for mode, shown in series.items():
            steps = [trial.global_step(ModeKeys[mode], s) for s in trial.steps(mode=ModeKeys[mode])]
            assert shown["x"] == steps
            expected = [float(trial.tensor(loss).value(step)) for step in steps]
            assert shown["mean"] == pytest.approx(expected, rel=1e-3)

        index = ui.get_json("/api/jobs/by-smdebug/tensors")
        assert index["tensors"] == trial.tensor_names()
        weight = next(name for name in index["collections"]["weights"] if name.endswith("weight"))
        history = ui.get_json(f"/api/jobs/by-smdebug/tensor?name={quote(weight)}")
        saved = trial.tensor(weight).steps()
        assert history["modes"]["TRAIN"]["steps"] == [
            step for step in saved if trial.mode(step) == ModeKeys.TRAIN
        ]
        step = trial.tensor(weight).steps()[-1]
        value = ui.get_json(f"/api/jobs/by-smdebug/tensor-value?name={quote(weight)}&step={step}")
        assert value["shape"] == list(trial.tensor(weight).value(step).shape)
        assert np.allclose(value["rows"], trial.tensor(weight).value(step), rtol=1e-3)

        gradient = index["collections"]["gradients"][0]
        history = ui.get_json(f"/api/jobs/by-smdebug/tensor?name={quote(gradient)}")
        assert history["modes"]["TRAIN"]["steps"]  # a gradient's reductions over steps
