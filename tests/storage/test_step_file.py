"""StepWriter: smdebug's layout, atomic appearance, empty steps, and the files it finishes with."""

from __future__ import annotations

import itertools
import json
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest

from trainprobe.storage import step_reader
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import (
    StepWriter,
    training_has_ended,
    write_collections_file,
    write_training_end,
)
from trainprobe.storage.tfrecord import OVERHEAD


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_step_writes_smdebugs_paths(tmp_path: Path) -> None:
    # reference/smdebug.md §2.1: events/000000000012/000000000012_worker_0.tfevents and
    # index/000000000/000000000012_worker_0.json; index directory = step // 1000, 9 digits.
    for step in (12, 123456):
        writer = StepWriter(str(tmp_path), step, "worker_0")
        writer.add("w", np.ones(3), mode=ModeKeys.TRAIN, mode_step=1)
        writer.close()
    assert _files(tmp_path) == [
        "events/000000000012/000000000012_worker_0.tfevents",
        "events/000000123456/000000123456_worker_0.tfevents",
        "index/000000000/000000000012_worker_0.json",
        "index/000000123/000000123456_worker_0.json",
    ]


def test_nothing_appears_before_close(tmp_path: Path) -> None:
    writer = StepWriter(str(tmp_path), 3, "worker_1")
    writer.add("w", np.ones(3), mode=ModeKeys.TRAIN, mode_step=3)
    assert all(name.endswith(".tmp") for name in _files(tmp_path))
    assert step_reader.list_index_files(str(tmp_path)) == []
    written = writer.close()
    names = _files(tmp_path)
    assert not any(name.endswith(".tmp") for name in names)
    assert written == sum((tmp_path / name).stat().st_size for name in names)


def test_an_empty_step_writes_nothing(tmp_path: Path) -> None:
    assert StepWriter(str(tmp_path), 0, "worker_0").close() == 0
    assert _files(tmp_path) == []


def test_the_index_locates_each_whole_record(tmp_path: Path) -> None:
    arrays = {"a": np.arange(10, dtype=np.float32), "b": np.array(1.0), "c": np.zeros((2, 0))}
    with StepWriter(str(tmp_path), 5, "worker_0") as writer:
        for name, array in arrays.items():
            writer.add(name, array, mode=ModeKeys.EVAL, mode_step=2, wall_time=10.0)
    index_path = tmp_path / "index/000000000/000000000005_worker_0.json"
    index = json.loads(index_path.read_text())
    assert index["meta"] == {
        "mode": "EVAL",
        "mode_step": 2,
        "event_file_name": "events/000000000005/000000000005_worker_0.tfevents",
    }
    payload = index["tensor_payload"]
    assert [entry["tensorname"] for entry in payload] == list(arrays)
    assert payload[0]["start_idx"] == 0
    for before, after in itertools.pairwise(payload):
        assert after["start_idx"] == before["start_idx"] + before["length"]
    events = (tmp_path / index["meta"]["event_file_name"]).stat().st_size
    assert payload[-1]["start_idx"] + payload[-1]["length"] == events
    records = step_reader.read_tensor_records(
        str(tmp_path),
        index["meta"]["event_file_name"],
        [(entry["start_idx"], entry["length"]) for entry in payload],
    )
    for event, (name, array) in zip(records, arrays.items(), strict=True):
        assert event.name == name and event.step == 5
        np.testing.assert_array_equal(event.value(), array)
    assert all(entry["length"] > OVERHEAD for entry in payload)


def test_a_shape_only_step_writes_just_an_index(tmp_path: Path) -> None:
    writer = StepWriter(str(tmp_path), 8, "worker_0")
    writer.add_shape("w", "model.w", (4, 5), mode=ModeKeys.TRAIN, mode_step=4)
    writer.close()
    assert _files(tmp_path) == ["index/000000000/000000000008_worker_0.json"]
    index = step_reader.read_step_index(str(tmp_path), "index/000000000/000000000008_worker_0.json")
    assert index.event_file is None
    assert (index.mode, index.mode_step) == (ModeKeys.TRAIN, 4)
    assert [(s.name, s.original_name, s.shape) for s in index.shapes] == [("w", "model.w", (4, 5))]


def test_discard_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), StepWriter(str(tmp_path), 1, "worker_0") as writer:
        writer.add("w", np.ones(3), mode=ModeKeys.TRAIN, mode_step=1)
        raise RuntimeError("the hook failed mid-step")
    assert _files(tmp_path) == []


def test_adding_after_close_is_refused(tmp_path: Path) -> None:
    writer = StepWriter(str(tmp_path), 1, "worker_0")
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.add("w", np.ones(3), mode=ModeKeys.TRAIN, mode_step=1)


def test_arrays_are_not_kept_and_other_threads_may_write(tmp_path: Path) -> None:
    writer = StepWriter(str(tmp_path), 2, "worker_0")
    array = np.ones((64, 64))
    ref = weakref.ref(array)

    def add(name: str) -> None:
        writer.add(name, np.full(100, len(name)), mode=ModeKeys.TRAIN, mode_step=2)

    threads = [threading.Thread(target=add, args=("t" * n,)) for n in range(1, 9)]
    for thread in threads:
        thread.start()
    writer.add("big", array, mode=ModeKeys.TRAIN, mode_step=2)
    for thread in threads:
        thread.join()
    writer.close()
    del array
    assert ref() is None
    index = step_reader.read_step_index(str(tmp_path), "index/000000000/000000000002_worker_0.json")
    assert sorted(t.name for t in index.tensors) == sorted(["big"] + ["t" * n for n in range(1, 9)])


def test_collections_file_and_training_end(tmp_path: Path) -> None:
    collections = {"losses": {"name": "losses", "include_regex": ["loss"], "tensor_names": []}}
    write_collections_file(str(tmp_path), "worker_3", collections, num_workers=4)
    path = tmp_path / "collections/000000000/worker_3_collections.json"
    assert json.loads(path.read_text()) == {
        "collections": collections,
        "_meta": {"num_workers": 4},
    }
    assert not training_has_ended(str(tmp_path))
    write_training_end(str(tmp_path))
    assert (tmp_path / "training_job_end.ts").read_bytes() == b""
    assert training_has_ended(str(tmp_path))
