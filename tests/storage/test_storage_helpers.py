"""Paths, atomic files, listing, ranged reads and reduction names."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainprobe.config.errors import ConfigError
from trainprobe.storage import files, locations
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.reduction_names import (
    ReductionName,
    parse_reduction_tensor_name,
    reduction_tensor_name,
)


def test_mode_numbers_are_smdebugs() -> None:
    assert [(m.name, int(m)) for m in ModeKeys] == [
        ("TRAIN", 1),
        ("EVAL", 2),
        ("PREDICT", 3),
        ("GLOBAL", 4),
    ]


def test_path_templates() -> None:
    assert locations.event_file(12, "worker_0") == (
        "events/000000000012/000000000012_worker_0.tfevents"
    )
    assert locations.index_file(2500, "worker_1") == "index/000000002/000000002500_worker_1.json"
    assert locations.collections_file("worker_0") == (
        "collections/000000000/worker_0_collections.json"
    )
    assert locations.tensorboard_file(ModeKeys.EVAL, 3, 42, "host") == (
        "tensorboard/EVAL/000000000003_42_host.tfevents"
    )
    assert locations.parse_index_file_name("index/000000002/000000002500_worker_1.json") == (
        2500,
        "worker_1",
    )
    assert locations.parse_index_file_name("index/000000002/notes.json") is None
    assert locations.parse_collections_file_name("x/worker_7_collections.json") == "worker_7"


def test_atomic_files_appear_whole_and_listings_skip_temporaries(tmp_path: Path) -> None:
    target = str(tmp_path / "a" / "b.json")
    pending = files.AtomicFile(target)
    pending.write(b"{}")
    assert not files.exists(target)
    assert files.list_files(str(tmp_path)) == []
    pending.commit()
    assert files.read_bytes(target) == b"{}"
    assert files.list_files(str(tmp_path), ".json") == ["a/b.json"]
    dropped = files.AtomicFile(str(tmp_path / "c.json"))
    dropped.write(b"x")
    dropped.discard()
    assert files.list_files(str(tmp_path)) == ["a/b.json"]
    assert files.list_files(str(tmp_path / "missing")) == []


def test_a_finished_file_is_renamed_into_place_replacing_an_older_one(tmp_path: Path) -> None:
    older = str(tmp_path / "new" / "dir" / "minute.json")
    files.write_atomic(older, b"old")
    finished = str(tmp_path / "minute.json.partial")
    files.write_atomic(finished, b"new")
    files.rename(finished, older)
    assert files.read_bytes(older) == b"new" and not files.exists(finished)
    files.write_atomic(finished, b"elsewhere")
    files.rename(finished, str(tmp_path / "made" / "for it.json"))  # its directory is made
    assert files.list_files(str(tmp_path)) == ["made/for it.json", "new/dir/minute.json"]


def test_ranged_reads(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    files.write_atomic(path, bytes(range(100)))
    assert files.read_ranges(path, [(10, 3), (0, 2)]) == [b"\x0a\x0b\x0c", b"\x00\x01"]
    with pytest.raises(EOFError):
        files.read_ranges(path, [(99, 2)])


def test_reduction_names_and_back() -> None:
    # reference/smdebug.md §1.6: smdebug/reductions/<op>/<name>, abs_<op>, norms as l1/l2.
    assert reduction_tensor_name("mean", "fc1.weight", abs=False) == (
        "smdebug/reductions/mean/fc1.weight"
    )
    assert reduction_tensor_name("l2_norm", "gradient/fc1.weight", abs=True) == (
        "smdebug/reductions/abs_l2/gradient/fc1.weight"
    )
    for op in ("min", "max", "mean", "std", "variance", "sum", "prod", "l1", "l2"):
        for is_abs in (False, True):
            name = reduction_tensor_name(op, "a/b", abs=is_abs)
            assert parse_reduction_tensor_name(name) == ReductionName(op, is_abs, "a/b")
    assert parse_reduction_tensor_name("fc1.weight") is None
    assert parse_reduction_tensor_name("smdebug/reductions/median/x") is None
    with pytest.raises(ConfigError, match="Did you mean 'mean'"):
        reduction_tensor_name("meen", "x", abs=False)


def test_a_range_reader_reads_many_files_through_a_few_open_ones(tmp_path: Path) -> None:
    paths = [str(tmp_path / f"f{n}") for n in range(3)]
    for n, path in enumerate(paths):
        files.write_atomic(path, bytes([n]) * 10)
    reader = files.RangeReader(max_open=2)
    for _ in range(2):
        for n, path in enumerate(paths):
            assert bytes(reader.read_range(path, 3, 4)) == bytes([n]) * 4
            assert [bytes(b) for b in reader.read_ranges(path, [(0, 1), (9, 1)])] == [
                bytes([n]),
                bytes([n]),
            ]
    buffer = reader.read_range(paths[0], 0, 2)
    buffer[0] = 9  # writable, and a copy: the file is untouched
    assert files.read_bytes(paths[0]) == bytes(10)
    with pytest.raises(EOFError):
        reader.read_range(paths[1], 8, 5)
    reader.close()
