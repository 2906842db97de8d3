"""A job written by trainprobe's hook comes with its scalars kept beside the step files, so the UI
draws a long job's curves the first time it looks without decoding the steps one by one: the
values it shows are exactly the trial's, even with every event file of the job gone."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch
from job_records import job_in_progress
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.analysis.scalar_series import ScalarSeries
from trainprobe.storage import locations
from trainprobe.storage.written_scalars import CHUNK_STEPS
from trainprobe.ui.job_view import JobView
from trial_scalars import Series, trial_scalars

TRAIN_STEPS = CHUNK_STEPS + 150


def _train(debug_output: Path) -> None:
    """A small classifier, a loss and a metric saved at every step, every tenth step in EVAL."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    hook = smd.Hook(
        str(debug_output),
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["losses", "sm_metrics"],
    )
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs, labels = torch.randn(64, 6), torch.randint(0, 3, (64,))
    for step in range(TRAIN_STEPS):
        evaluating = step % 10 == 9
        hook.set_mode(smd.modes.EVAL if evaluating else smd.modes.TRAIN)
        batch = slice(step % 8 * 8, step % 8 * 8 + 8)
        with torch.set_grad_enabled(not evaluating):
            outputs = model(inputs[batch])
            loss = loss_fn(outputs, labels[batch])
        hook.save_scalar("accuracy", (outputs.argmax(1) == labels[batch]).float().mean())
        if not evaluating:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    hook.close()


def _shown(series: ScalarSeries, names: list[str]) -> Series:
    return {
        (name, mode): (s.tolist(), v.tolist())
        for name in names
        for mode, (s, v) in series.of(name).items()
    }


def test_the_first_look_at_a_hooked_job_reads_its_kept_scalars_and_no_event_file(
    tmp_path: Path,
) -> None:
    job_dir = tmp_path / "hooked"
    debug_output = job_dir / "debug-output"
    _train(debug_output)
    kept = sorted(os.listdir(debug_output / locations.scalar_chunks_dir("worker_0")))
    last = TRAIN_STEPS - 1
    assert kept == [
        f"{0:012d}-{CHUNK_STEPS - 1:012d}.chunk",
        f"{CHUNK_STEPS:012d}-{last:012d}.chunk",
    ]
    expected = trial_scalars(debug_output)
    names = ["CrossEntropyLoss_output_0", "scalar/accuracy"]
    recorded = ["trainprobe/gradient_norm", "trainprobe/learning_rate", "trainprobe/loss"]
    assert set(expected) == {(name, mode) for name in names for mode in ("TRAIN", "EVAL")}

    shutil.rmtree(debug_output / locations.EVENTS_DIR)  # the values can only come from the chunks
    view = JobView(job_in_progress("hooked", job_dir), str(tmp_path / "ui-scalars"))
    charts = view.scalars()
    first = ["trainprobe/loss", "trainprobe/learning_rate", "trainprobe/gradient_norm"]
    assert [chart["tensor"] for chart in charts][:3] == first  # the training's own curves
    assert {chart["tensor"] for chart in charts} == set(names + recorded)
    assert _shown(view._series(), names) == expected
    # The hook's record of every TRAIN step, read from the chunks alone too.
    shown = _shown(view._series(), recorded)
    assert set(shown) == {(name, "TRAIN") for name in recorded}
    assert [len(steps) for steps, _ in shown.values()] == [TRAIN_STEPS - TRAIN_STEPS // 10] * 3
    assert view._series().read_through == last
