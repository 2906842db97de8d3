"""Tensor output on S3 (a real SeaweedFS server, tests/seaweedfs.py) through the storage layer.

The same functions that write and read local directories take ``s3://bucket/prefix`` URLs: a
step's objects appear whole, a large step goes up in parts, a discarded step leaves nothing,
and a reader following a live output lists only the steps it has not seen.
"""

from __future__ import annotations

import numpy as np
import pytest

from trainprobe.storage import files, object_store
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end
from trainprobe.storage.step_reader import list_index_files
from trainprobe.trials import create_trial

COLLECTIONS = {"weights": {"name": "weights", "include_regex": [".*"], "tensor_names": []}}


def _write_step(out: str, step: int, *arrays: tuple[str, np.ndarray]) -> None:
    with StepWriter(out, step, "worker_0") as writer:
        for name, array in arrays:
            writer.add(name, array, mode=ModeKeys.TRAIN, mode_step=step)


def test_steps_written_to_a_bucket_read_back_equal(s3_url: str) -> None:
    write_collections_file(s3_url, "worker_0", COLLECTIONS, 1)
    for step in range(3):
        _write_step(s3_url, step, ("w", np.arange(12, dtype=np.float32).reshape(3, 4) * step))
    write_training_end(s3_url)
    trial = create_trial(s3_url, timeout=5)
    assert trial.steps() == [0, 1, 2]
    assert trial.loaded_all_steps
    for step in range(3):
        expected = np.arange(12, dtype=np.float32).reshape(3, 4) * step
        np.testing.assert_array_equal(trial.tensor("w").value(step), expected)


def test_a_large_step_goes_up_in_parts_and_reads_back_whole(s3_url: str) -> None:
    large = np.random.default_rng(0).standard_normal(3 * object_store.PART_SIZE // 8 // 2)
    assert large.nbytes > object_store.PART_SIZE  # more than one part
    write_collections_file(s3_url, "worker_0", COLLECTIONS, 1)
    _write_step(s3_url, 0, ("small", np.ones(3)), ("large", large))
    trial = create_trial(s3_url, timeout=5)
    np.testing.assert_array_equal(trial.tensor("large").value(0), large)
    np.testing.assert_array_equal(trial.tensor("small").value(0), np.ones(3))


def test_a_discarded_step_leaves_no_object(s3_url: str) -> None:
    writer = StepWriter(s3_url, 4, "worker_0")
    writer.add("w", np.ones(1000), mode=ModeKeys.TRAIN, mode_step=4)
    writer.discard()
    _write_step(s3_url, 5, ("w", np.zeros(2)))
    assert files.list_files(s3_url) == [
        "events/000000000005/000000000005_worker_0.tfevents",
        "index/000000000/000000000005_worker_0.json",
    ]


def test_a_live_trial_follows_new_steps_listing_only_the_new_ones(s3_url: str) -> None:
    write_collections_file(s3_url, "worker_0", COLLECTIONS, 1)
    for step in range(3):
        _write_step(s3_url, step, ("w", np.full(2, step)))
    trial = create_trial(s3_url, timeout=5)
    assert trial.steps() == [0, 1, 2]
    assert not trial.loaded_all_steps
    for step in (3, 1000, 1001):  # 1000 starts a new index folder
        _write_step(s3_url, step, ("w", np.full(2, step)))
    # What the trial's refresh lists: the last step it had seen, then the new ones.
    assert list_index_files(s3_url, from_step=2) == [
        "index/000000000/000000000002_worker_0.json",
        "index/000000000/000000000003_worker_0.json",
        "index/000000001/000000001000_worker_0.json",
        "index/000000001/000000001001_worker_0.json",
    ]
    write_training_end(s3_url)
    trial.refresh_data()
    assert trial.steps() == [0, 1, 2, 3, 1000, 1001]
    assert trial.loaded_all_steps
    np.testing.assert_array_equal(trial.tensor("w").value(1001), np.full(2, 1001))


def test_a_missing_prefix_is_reported_like_a_missing_directory(s3_url: str) -> None:
    with pytest.raises(Exception, match="does not exist"):
        create_trial(s3_url + "/nothing-here", timeout=0)
