"""DistributedDataParallel with two processes (torchrun, gloo): each rank writes its own files.

The training is tests/capture/ddp_training.py. With include_workers="all" both ranks write
worker_<rank> files and the collections files expect 2 workers; with "one" only rank 0 writes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from torchrun import torchrun
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("ddp_training.py")


def run_ranks(out: Path, include_workers: str) -> None:
    torchrun(SCRIPT, str(out), include_workers)


def test_every_rank_writes_its_own_worker_files(tmp_path: Path) -> None:
    run_ranks(tmp_path, "all")
    collections = sorted(p.name for p in (tmp_path / "collections" / "000000000").iterdir())
    assert collections == ["worker_0_collections.json", "worker_1_collections.json"]
    trial = create_trial(str(tmp_path))
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.num_workers == 2
    assert trial.steps() == [0, 1, 2]
    # names are those of the model inside the DDP wrapper
    assert "Sequential_0.weight" in trial.tensor_names()
    assert "gradient/Sequential_0.weight" in trial.tensor_names()
    rank = trial.tensor("scalar/rank")
    assert rank.workers(1) == ["worker_0", "worker_1"]
    # a scalar is saved as smdebug saves it: a one-element vector
    assert [rank.value(1, worker=w).item() for w in ("worker_0", "worker_1")] == [0.0, 1.0]
    # both ranks start every step from the same (all-reduced) weights, from different data
    weight = trial.tensor("Sequential_0.weight")
    np.testing.assert_array_equal(
        weight.value(2, worker="worker_0"), weight.value(2, worker="worker_1")
    )
    gradient = trial.tensor("gradient/Sequential_0.weight")
    assert not np.array_equal(
        gradient.value(0, worker="worker_0"), gradient.value(0, worker="worker_1")
    )


def test_with_one_worker_only_rank_0_writes(tmp_path: Path) -> None:
    run_ranks(tmp_path, "one")
    trial = create_trial(str(tmp_path))
    assert trial.workers() == ["worker_0"]
    assert trial.num_workers == 1
    assert trial.steps() == [0, 1, 2]
    assert not list(tmp_path.rglob("*worker_1*"))
