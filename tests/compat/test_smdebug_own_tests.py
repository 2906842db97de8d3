"""smdebug 1.0.34's own tests, run against trainprobe with smdebug's names (or trainprobe's, where
smdebug's test reached for an internal of smdebug's to write its data):

- ``tests/analysis/trials/test_local.py``: a trial of 20 steps of 10 tensors, built with
  ``LocalTrial(name, dirname)``, imported from ``trainprobe.trials`` as from ``smdebug.trials``;
- ``tests/pytorch/test_distributed_training.py::test_run_net_distributed_save_all_test_timeline``:
  two spawned workers, each importing smdebug afresh, save every step chosen and mark the
  timeline; the trial has both workers and the timeline files have no negative times.
"""

from __future__ import annotations

import importlib
import json
import uuid
from pathlib import Path

import numpy as np
import pytest

from trainprobe.storage.step_file import StepWriter, write_collections_file
from trainprobe.trials import LocalTrial, modes


def _write_step(trial_dir: Path, step: int, tensors: int, worker: str) -> None:
    """One step of ``tensors`` tensors ``foo_<i>``, each a 3x3x3 array of ``step``, and the
    collections naming them, as smdebug's ``generate_data`` writes them."""
    with StepWriter(str(trial_dir), step, worker) as writer:
        for index in range(tensors):
            array = np.ones((3, 3, 3), dtype=np.float32) * step
            writer.add(f"foo_{index}", array, mode=modes.GLOBAL, mode_step=step)
    names = [f"foo_{index}" for index in range(tensors)]
    collections = {
        "default": {"name": "default", "tensor_names": names},
        "gradients": {"name": "gradients", "tensor_names": names},
    }
    write_collections_file(str(trial_dir), worker, collections, num_workers=1)


def test_local_trial(tmp_path: Path) -> None:
    name, steps, tensors = str(uuid.uuid4()), 20, 10
    for step in range(steps):
        _write_step(tmp_path / name, step, tensors, "algo-1")

    trial = LocalTrial(name=name, dirname=str(tmp_path / name))

    assert trial.name == name
    assert len(trial.tensor_names()) == tensors
    for tensor_name in trial.tensor_names():
        assert len(trial.tensor(tensor_name).steps()) == steps
        for step in trial.tensor(tensor_name).steps():
            assert trial.tensor(tensor_name).value(step) is not None


@pytest.mark.usefixtures("smdebug_names_on")
def test_local_trial_is_smdebugs() -> None:
    from smdebug.trials import LocalTrial as SmdebugLocalTrial
    from smdebug.trials.local_trial import LocalTrial as Deeper

    assert SmdebugLocalTrial is LocalTrial is Deeper


@pytest.mark.slow
@pytest.mark.usefixtures("smdebug_names_on")
def test_distributed_training_saves_every_worker_and_its_timeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from smdebug.profiler.profiler_constants import DEFAULT_PREFIX, HOROVODTIMELINE_SUFFIX
    from smdebug.trials import create_trial

    out_dir = str(tmp_path / "out")
    config = tmp_path / "profiler_config.json"
    config.write_text(
        json.dumps({"ProfilingParameters": {"ProfilerEnabled": True, "LocalPath": out_dir}})
    )
    monkeypatch.setenv("SMPROFILER_CONFIG_PATH", str(config))
    training = importlib.import_module("distributed_smdebug_training")

    exit_codes = training.train_on_two_workers(out_dir)

    assert exit_codes == [0, 0]
    trial = create_trial(path=out_dir)
    assert len(trial.workers()) == 2
    assert len(trial.steps()) == 3
    timelines = list(Path(out_dir, DEFAULT_PREFIX).rglob("*.json"))
    assert len(timelines) >= 2
    for timeline in timelines:
        for event in json.loads(timeline.read_text()):
            if event["name"].startswith("event"):
                assert int(event["ts"]) >= 0
    assert not list(Path(out_dir, DEFAULT_PREFIX).rglob(f"*{HOROVODTIMELINE_SUFFIX}"))
