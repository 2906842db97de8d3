"""A sharded tensor read back: each worker saved its piece with where it lies (the index's
``shard_payload``), and the trial returns the full tensor, in its own shape.

The pieces are written with trainprobe's StepWriter as a 2-rank job writes them: FSDP2's row
pieces (uneven), tensor parallelism's column pieces and its partial sums, FSDP1's flat pieces.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trainprobe.exceptions import TensorUnavailableForStep
from trainprobe.storage.index_file import ShardEntry
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end
from trainprobe.trials import create_trial

FULL = np.arange(35, dtype=np.float32).reshape(7, 5) / 7
WORKERS = ("worker_0", "worker_1")


def write(out: Path, pieces: dict[str, list[tuple[np.ndarray, ShardEntry]]]) -> None:
    """Write step 0 of each worker: ``pieces[worker]`` are its (value, place) pairs."""
    for worker in WORKERS:
        with StepWriter(str(out), 0, worker) as writer:
            for value, place in pieces.get(worker, []):
                writer.add(place.name, value, mode=ModeKeys.TRAIN, mode_step=0, shard=place)
        write_collections_file(str(out), worker, {}, len(WORKERS))
    write_training_end(str(out))


def test_row_pieces_of_uneven_size_make_the_full_tensor(tmp_path: Path) -> None:
    place = ShardEntry("fc.weight", (7, 5), (0, 0))
    write(
        tmp_path,
        {
            "worker_0": [(FULL[:4], place)],
            "worker_1": [(FULL[4:], ShardEntry("fc.weight", (7, 5), (4, 0)))],
        },
    )
    tensor = create_trial(str(tmp_path)).tensor("fc.weight")
    np.testing.assert_array_equal(tensor.value(0), FULL)
    assert tensor.shape(0) == (7, 5)
    np.testing.assert_array_equal(tensor.values()[0], FULL)
    # computed from the full tensor, not a piece
    assert float(tensor.reduction_value(0, "l2")) == pytest.approx(np.linalg.norm(FULL))
    # a worker's own value is its piece, as it saved it
    np.testing.assert_array_equal(tensor.value(0, worker="worker_1"), FULL[4:])
    assert tensor.piece(0, worker="worker_1") == ShardEntry("fc.weight", (7, 5), (4, 0))


def test_column_pieces_and_sums_of_terms(tmp_path: Path) -> None:
    term = np.ones((2, 3), dtype=np.float32)
    write(
        tmp_path,
        {
            "worker_0": [
                (FULL[:, :3], ShardEntry("down.weight", (7, 5), (0, 0))),
                (term, ShardEntry("norm.weight", (2, 3), (0, 0), summed=True)),
            ],
            "worker_1": [
                (FULL[:, 3:], ShardEntry("down.weight", (7, 5), (0, 3))),
                (term * 2, ShardEntry("norm.weight", (2, 3), (0, 0), summed=True)),
            ],
        },
    )
    trial = create_trial(str(tmp_path))
    np.testing.assert_array_equal(trial.tensor("down.weight").value(0), FULL)
    np.testing.assert_array_equal(trial.tensor("norm.weight").value(0), term * 3)


def test_flat_pieces_of_fsdp1_make_the_full_tensor(tmp_path: Path) -> None:
    flat = FULL.reshape(-1)
    write(
        tmp_path,
        {
            "worker_0": [(flat[:18], ShardEntry("fc.weight", (7, 5), flat_offset=0))],
            "worker_1": [(flat[18:], ShardEntry("fc.weight", (7, 5), flat_offset=18))],
        },
    )
    np.testing.assert_array_equal(create_trial(str(tmp_path)).tensor("fc.weight").value(0), FULL)


def test_a_missing_piece_is_not_passed_off_as_the_tensor(tmp_path: Path) -> None:
    write(tmp_path, {"worker_0": [(FULL[:4], ShardEntry("fc.weight", (7, 5), (0, 0)))]})
    with pytest.raises(TensorUnavailableForStep):
        create_trial(str(tmp_path)).tensor("fc.weight").value(0)


def test_the_index_keeps_smdebug_s_keys_and_adds_the_places(tmp_path: Path) -> None:
    write(tmp_path, {"worker_1": [(FULL[4:], ShardEntry("fc.weight", (7, 5), (4, 0)))]})
    index = json.loads((tmp_path / "index/000000000/000000000000_worker_1.json").read_text())
    assert list(index) == ["meta", "tensor_payload", "shape_payload", "shard_payload"]
    assert index["shard_payload"] == [
        {"tensorname": "fc.weight", "shape": [7, 5], "offsets": [4, 0]}
    ]
