"""The job page's curves come from the scalars the UI keeps as it reads them: each value exactly
the trial's, and a job read once opens the next time from what was kept, reading only the steps
written since. The job's files are written by trainprobe's own StepWriter."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import numpy as np
from job_records import job_in_progress

from trainprobe.analysis.scalar_series import SAVE_EVERY
from trainprobe.analysis.trial import create_trial
from trainprobe.jobs import JobRecord
from trainprobe.storage import locations
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file
from trainprobe.ui.job_view import JobView

NAMES = ["CrossEntropyLoss_output_0", "metric-accuracy"]


def _write(debug_output: Path, first: int, last: int) -> None:
    rng = np.random.default_rng(first)
    for step in range(first, last):
        mode = ModeKeys.EVAL if step % 7 == 6 else ModeKeys.TRAIN
        values = rng.normal(size=len(NAMES)).astype(np.float32)
        with StepWriter(str(debug_output), step, "worker_0") as writer:
            writer.add_scalars(NAMES, ["float32"] * len(NAMES), values, mode=mode, mode_step=step)
            writer.add("weights", rng.normal(size=(3, 4)), mode=mode, mode_step=step)


def _job(tmp_path: Path, steps: int) -> tuple[JobRecord, Path]:
    debug_output = tmp_path / "kept" / "debug-output"
    collections = {
        "losses": {"include_regex": ["Loss_output"], "tensor_names": [], "save_config": None},
        "metrics": {"include_regex": ["^metric-"], "tensor_names": [], "save_config": None},
        "weights": {"include_regex": ["^weights"], "tensor_names": [], "save_config": None},
    }
    write_collections_file(str(debug_output), "worker_0", collections, num_workers=1)
    _write(debug_output, 0, steps)
    return job_in_progress("kept", tmp_path / "kept"), debug_output


def _trial_values(
    debug_output: Path, name: str, first: int = 0
) -> dict[str, tuple[list[int], list[float]]]:
    """What the trial returns for ``name``: its value at each step from ``first``, by mode."""
    trial = create_trial(str(debug_output), timeout=0)
    found: dict[str, tuple[list[int], list[float]]] = {}
    tensor = trial.tensor(name)
    for step in tensor.steps():
        if step < first:
            continue
        mode = (trial.mode(step) or ModeKeys.GLOBAL).name
        series = found.setdefault(mode, ([], []))
        series[0].append(step)
        series[1].append(float(tensor.value(step)))
    return found


def _kept(view: JobView, name: str) -> dict[str, tuple[list[int], list[float]]]:
    view.scalars()
    series = view._series().of(name)
    return {mode: (steps.tolist(), values.tolist()) for mode, (steps, values) in series.items()}


def test_kept_values_equal_the_trials_through_a_restart_and_new_steps(tmp_path: Path) -> None:
    steps = SAVE_EVERY + 300
    record, debug_output = _job(tmp_path, steps)
    root = str(tmp_path / "ui-scalars")

    first = JobView(record, root)
    assert first.scalar_names() == NAMES  # losses first; the weights are not a scalar
    for name in NAMES:
        assert _kept(first, name) == _trial_values(debug_output, name)
    assert os.listdir(root)  # kept for the next look

    # A restarted UI shows the earlier steps from what it kept: their files may even be gone.
    for step in range(0, SAVE_EVERY, 2):
        os.remove(debug_output / locations.event_file(step, "worker_0"))
    kept_before = {name: _kept(first, name) for name in NAMES}
    again = JobView(record, root)
    _write(debug_output, steps, steps + 40)  # the job goes on
    for name in NAMES:
        shown = _kept(again, name)
        for mode, (found_steps, found_values) in shown.items():
            old_steps, old_values = kept_before[name][mode]
            assert found_steps[: len(old_steps)] == old_steps
            assert found_values[: len(old_values)] == old_values
            assert found_steps[-1] >= steps  # and the new steps, read from their files
        for mode, (new_steps, new_values) in _trial_values(debug_output, name, steps).items():
            found_steps, found_values = shown[mode]
            at = found_steps.index(new_steps[0])
            assert found_steps[at:] == new_steps and found_values[at:] == new_values


def test_a_spike_in_the_kept_steps_survives_and_zooming_rebuckets_them(tmp_path: Path) -> None:
    record, debug_output = _job(tmp_path, SAVE_EVERY + 10)
    with StepWriter(str(debug_output), SAVE_EVERY + 10, "worker_0") as writer:
        writer.add_scalars(
            NAMES, ["float32"] * 2, np.array([1e6, 0.0]), mode=ModeKeys.TRAIN, mode_step=0
        )
    _write(debug_output, SAVE_EVERY + 11, 3 * SAVE_EVERY)
    root = str(tmp_path / "ui-scalars")
    JobView(record, root).scalars()

    view = JobView(record, root)  # from what was kept
    [chart] = [chart for chart in view.scalars() if chart["tensor"] == NAMES[0]]
    train = next(series for series in chart["series"] if series["mode"] == "TRAIN")
    assert len(train["x"]) <= 1000 and max(train["max"]) == 1e6
    [zoomed] = [c for c in view.scalars(SAVE_EVERY, SAVE_EVERY + 20) if c["tensor"] == NAMES[0]]
    train = next(series for series in zoomed["series"] if series["mode"] == "TRAIN")
    assert SAVE_EVERY + 10 in train["x"] and max(train["max"]) == 1e6
    assert train["points"] == len(train["x"]) == 18  # every TRAIN step of the range


def test_a_job_made_again_under_the_same_name_is_read_afresh(tmp_path: Path) -> None:
    record, debug_output = _job(tmp_path, SAVE_EVERY + 5)
    root = str(tmp_path / "ui-scalars")
    JobView(record, root).scalars()

    shutil.rmtree(debug_output)
    write_collections_file(
        str(debug_output),
        "worker_0",
        {"losses": {"include_regex": ["Loss_output"], "tensor_names": [], "save_config": None}},
        num_workers=1,
    )
    with StepWriter(str(debug_output), 0, "worker_0") as writer:
        writer.add_scalars(
            NAMES[:1], ["float32"], np.array([7.0]), mode=ModeKeys.TRAIN, mode_step=0
        )
    made_again = dataclasses.replace(record, creation_time=record.creation_time + 60)
    [chart] = JobView(made_again, root).scalars()
    assert chart["series"] == [
        {"mode": "TRAIN", "points": 1, "x": [0.0], "mean": [7.0], "min": [7.0], "max": [7.0]}
    ]


def test_a_damaged_kept_chunk_is_read_again_from_the_jobs_files(tmp_path: Path) -> None:
    record, debug_output = _job(tmp_path, SAVE_EVERY + 5)
    root = str(tmp_path / "ui-scalars")
    JobView(record, root).scalars()
    [directory] = os.listdir(root)
    [chunk] = os.listdir(os.path.join(root, directory))
    with open(os.path.join(root, directory, chunk), "r+b") as file:
        file.truncate(100)

    view = JobView(record, root)
    for name in NAMES:
        assert _kept(view, name) == _trial_values(debug_output, name)
