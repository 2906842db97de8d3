"""The job page's curves keep every spike: a long series is cut into at most 1000 buckets, each
keeping its minimum and maximum, and a range of steps is bucketed again from every step in it.
The job's files are written by trainprobe's own StepWriter; a job store record points at them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from job_records import job_in_progress

from trainprobe.jobs import JobRecord
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file
from trainprobe.ui.job_view import JobView

STEPS = 3000
SPIKE_AT = 1234


def _job(tmp_path: Path) -> JobRecord:
    debug_output = tmp_path / "spiky" / "debug-output"
    losses = {"include_regex": ["Loss_output"], "tensor_names": [], "save_config": None}
    write_collections_file(str(debug_output), "worker_0", {"losses": losses}, num_workers=1)
    for step in range(STEPS):
        loss = 50.0 if step == SPIKE_AT else 1.0 / (1 + step)
        mode = ModeKeys.EVAL if step % 10 == 9 else ModeKeys.TRAIN
        with StepWriter(str(debug_output), step, "worker_0") as writer:
            writer.add("Loss_output_0", np.array(loss, np.float32), mode=mode, mode_step=step)
    return job_in_progress("spiky", tmp_path / "spiky")


def test_a_spike_survives_bucketing_and_a_range_is_bucketed_again(tmp_path: Path) -> None:
    view = JobView(_job(tmp_path))

    [chart] = view.scalars()
    series = {found["mode"]: found for found in chart["series"]}
    assert set(series) == {"TRAIN", "EVAL"}  # modes apart
    train = series["TRAIN"]
    assert train["points"] == STEPS - STEPS // 10
    assert len(train["x"]) <= 1000
    assert max(train["max"]) == 50.0  # the one spiking step, at full height
    assert max(train["mean"]) < 50.0

    [zoomed] = view.scalars(1200, 1300)
    train = next(found for found in zoomed["series"] if found["mode"] == "TRAIN")
    assert train["points"] == len(train["x"]) == 91  # every step of the range, none dropped
    assert train["x"][0] >= 1200 and train["x"][-1] <= 1300
    assert train["max"][train["x"].index(SPIKE_AT)] == 50.0
