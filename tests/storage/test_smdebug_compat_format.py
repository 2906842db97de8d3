"""The format against smdebug 1.0.34 itself: the same bytes as its writer, and its trial reads ours.

Runs smdebug in its reference environment (tests/reference_envs.py), built on first use: hence
the ``slow`` marker, although each test takes seconds once the environment exists.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from index_checksums import without_checksums
from reference_envs import run_reference
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.reduction_names import reduction_tensor_name
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end
from trainprobe.storage.tensor_event import decode_tensor_event

pytestmark = pytest.mark.slow

# (tensor name, numpy expression, mode, mode step): evaluated identically on both sides.
CASES = [
    ("Net_fc1.weight", "np.arange(12, dtype=np.float32).reshape(3, 4) / 7", "TRAIN", 0),
    ("gradient/Net_fc1.weight", "np.linspace(-1, 1, 5)", "TRAIN", 1),
    ("loss", "np.array(0.25, dtype=np.float32)", "EVAL", 3),
    ("empty", "np.zeros((0, 4), dtype=np.float32)", "GLOBAL", 9),
    ("half", "np.array([[1.5, -2.0]], dtype=np.float16)", "PREDICT", 2),
    ("ints", "np.array([-(2**40), 7], dtype=np.int64)", "TRAIN", 1),
    ("small_ints", "np.array([[-1, 2], [3, -4]], dtype=np.int8)", "TRAIN", 1),
    ("unsigned", "np.array([2**64 - 1], dtype=np.uint64)", "TRAIN", 1),
    ("flags", "np.array([True, False])", "TRAIN", 1),
    ("complex", "np.array([1 + 2j], dtype=np.complex64)", "TRAIN", 1),
    ("labels", "np.array(['cat', 'dog'])", "TRAIN", 1),
    (reduction_tensor_name("mean", "Net_fc1.weight", abs=False), "np.array(0.5)", "TRAIN", 0),
]
STEPS = [0, 7, 123456]
WALL_TIME = 1700000000.25


def test_event_and_index_bytes_equal_smdebugs_writer(tmp_path: Path) -> None:
    # Event files are smdebug's, byte for byte (its constant footer included: smdebug's trial
    # refuses any other). Index files are too, but for the checksum trainprobe adds to each
    # tensor entry, which smdebug ignores: it must be the masked CRC32C of the record's payload.
    smdebug_dir = tmp_path / "smdebug"
    run_reference(
        "smdebug",
        f"""
        import json
        import numpy as np
        from smdebug.core.modes import ModeKeys
        from smdebug.core.writer import FileWriter
        for step in {STEPS!r}:
            writer = FileWriter(trial_dir={str(smdebug_dir)!r}, step=step, worker="worker_0")
            for name, expression, mode, mode_step in {CASES!r}:
                writer.write_tensor(tdata=eval(expression), tname=name, mode=ModeKeys[mode],
                                    mode_step=mode_step, timestamp={WALL_TIME!r})
            writer.close()
        print(json.dumps("done"))
        """,
    )
    ours = tmp_path / "trainprobe"
    for step in STEPS:
        writer = StepWriter(str(ours), step, "worker_0")
        for name, expression, mode, mode_step in CASES:
            array = eval(expression, {"np": np})
            writer.add(name, array, mode=ModeKeys[mode], mode_step=mode_step, wall_time=WALL_TIME)
        writer.close()
    theirs = sorted(p.relative_to(smdebug_dir) for p in smdebug_dir.rglob("*") if p.is_file())
    mine = sorted(p.relative_to(ours) for p in ours.rglob("*") if p.is_file())
    assert mine == theirs
    assert len(mine) == 2 * len(STEPS)
    for relative in theirs:
        mine_bytes = (ours / relative).read_bytes()
        if relative.suffix == ".json":
            mine_bytes = without_checksums(ours, mine_bytes)
        assert mine_bytes == (smdebug_dir / relative).read_bytes(), relative


def _collection(name: str, regex: list[str], tensors: list[str]) -> dict[str, object]:
    every_mode = {"save_interval": 1, "save_steps": [], "start_step": 0, "end_step": None}
    return {
        "name": name,
        "include_regex": regex,
        "tensor_names": tensors,
        "reduction_config": {"save_raw_tensor": True, "reductions": "mean", "save_shape": False},
        "save_config": {mode: dict(every_mode) for mode in ("TRAIN", "EVAL", "PREDICT", "GLOBAL")},
        "save_histogram": True,
    }


def _write_run(out_dir: Path) -> dict[str, object]:
    """Two workers, TRAIN steps 0-3 then EVAL steps 0-1 (global 4, 6), saved every other step.

    Returns what a reader should find, derived from what was written.
    """
    rng = np.random.default_rng(0)
    schedule = [(0, ModeKeys.TRAIN, 0), (2, ModeKeys.TRAIN, 2), (4, ModeKeys.EVAL, 0)]
    schedule.append((6, ModeKeys.EVAL, 2))
    values: dict[str, dict[str, dict[str, object]]] = {}
    for step, mode, mode_step in schedule:
        for worker in ("worker_0", "worker_1"):
            arrays = {
                "Net_fc1.weight": rng.standard_normal((4, 3)).astype(np.float32),
                "Net_fc1.bias": rng.standard_normal(4),
                "CrossEntropyLoss_output_0": np.array(rng.random(), dtype=np.float32),
                "counts": rng.integers(-5, 5, size=(2, 2), dtype=np.int32),
                "mask": rng.random(3) > 0.5,
                "empty": np.zeros((0, 2), dtype=np.float32),
                "bf16": rng.standard_normal(3).astype(np.float32),
            }
            with StepWriter(str(out_dir), step, worker) as writer:
                for name, array in arrays.items():
                    original = "bfloat16" if name == "bf16" else None
                    writer.add(name, array, mode=mode, mode_step=mode_step, original_dtype=original)
                weight = arrays["Net_fc1.weight"]
                writer.add(
                    reduction_tensor_name("mean", "Net_fc1.weight", abs=False),
                    np.array(weight.mean()),
                    mode=mode,
                    mode_step=mode_step,
                )
                writer.add(
                    reduction_tensor_name("l2", "Net_fc1.weight", abs=True),
                    np.array(np.linalg.norm(np.abs(weight).reshape(-1))),
                    mode=mode,
                    mode_step=mode_step,
                )
            for name, array in arrays.items():
                if array.size:
                    values.setdefault(name, {}).setdefault(str(step), {})[worker] = array.tolist()
            values.setdefault("mean", {}).setdefault(str(step), {})[worker] = float(weight.mean())
            l2 = float(np.linalg.norm(np.abs(weight).reshape(-1)))
            values.setdefault("abs_l2", {}).setdefault(str(step), {})[worker] = l2
    collections = {
        "weights": _collection("weights", ["^(?!gradient).*weight"], ["Net_fc1.weight"]),
        "losses": _collection("losses", ["[Ll]oss_(?!input).*output"], []),
        "custom": _collection("custom", [], ["counts"]),
    }
    for worker in ("worker_0", "worker_1"):
        write_collections_file(str(out_dir), worker, collections, num_workers=2)
    write_training_end(str(out_dir))
    return {
        "names": sorted(
            [
                "CrossEntropyLoss_output_0",
                "Net_fc1.bias",
                "bf16",
                "Net_fc1.weight",
                "counts",
                "empty",
                "mask",
            ]
        ),
        "steps": [step for step, _, _ in schedule],
        "train": [ms for _, mode, ms in schedule if mode == ModeKeys.TRAIN],
        "eval": [ms for _, mode, ms in schedule if mode == ModeKeys.EVAL],
        "values": values,
    }


def test_smdebugs_trial_reads_what_trainprobe_wrote(tmp_path: Path) -> None:
    expected = _write_run(tmp_path)
    found = run_reference(
        "smdebug",
        f"""
        import json, os
        os.environ["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"
        from smdebug import modes
        from smdebug.trials import create_trial
        trial = create_trial({str(tmp_path)!r})
        values = {{}}
        for name in trial.tensor_names():
            tensor = trial.tensor(name)
            for step in tensor.steps():
                for worker in sorted(tensor.workers(step)):
                    if name == "empty":
                        continue
                    value = tensor.value(step, worker=worker)
                    values.setdefault(name, {{}}).setdefault(str(step), {{}})[worker] = (
                        value.tolist())
                    if name == "Net_fc1.weight":
                        for op, is_abs in (("mean", False), ("l2", True)):
                            key = ("abs_" if is_abs else "") + op
                            reduced = tensor.reduction_value(step, op, worker=worker, abs=is_abs)
                            values.setdefault(key, {{}}).setdefault(str(step), {{}})[worker] = (
                                float(reduced))
        weight = trial.tensor("Net_fc1.weight")
        print(json.dumps({{
            "names": trial.tensor_names(),
            "steps": trial.steps(),
            "train": trial.steps(mode=modes.TRAIN),
            "eval": trial.steps(mode=modes.EVAL),
            "workers": trial.workers(),
            "modes": sorted(m.value for m in trial.modes()),
            "eval_2_global": trial.global_step(modes.EVAL, 2),
            "mode_of_4": [trial.mode(4).value, trial.mode_step(4)],
            "weight_shape": list(weight.shape(2)),
            "weight_workers": sorted(weight.workers(2)),
            "reductions": sorted(
                [name, is_abs] for name, is_abs in weight.reduction_values(0).keys()),
            "dtypes": {{n: str(trial.tensor(n).value(0).dtype) for n in
                       ("Net_fc1.weight", "Net_fc1.bias", "counts", "mask", "bf16")}},
            "collections": sorted(trial.collections()),
            "weights_regex": trial.collection("weights").include_regex,
            "in_weights": trial.tensor_names(collection="weights"),
            "in_custom": trial.tensor_names(collection="custom"),
            "values": values,
        }}))
        """,
    )
    assert isinstance(found, dict)
    assert found["names"] == expected["names"]
    assert found["steps"] == expected["steps"]
    assert found["train"] == expected["train"]
    assert found["eval"] == expected["eval"]
    assert found["workers"] == ["worker_0", "worker_1"]
    assert found["modes"] == [int(ModeKeys.TRAIN), int(ModeKeys.EVAL)]
    assert found["eval_2_global"] == 6
    assert found["mode_of_4"] == [int(ModeKeys.EVAL), 0]
    assert found["weight_shape"] == [4, 3]
    assert found["weight_workers"] == ["worker_0", "worker_1"]
    assert found["reductions"] == [["l2", True], ["mean", False]]
    assert found["dtypes"] == {
        "Net_fc1.weight": "float32",
        "Net_fc1.bias": "float64",
        "counts": "int32",
        "mask": "bool",
        "bf16": "float32",
    }
    assert found["collections"] == ["custom", "losses", "weights"]
    assert found["weights_regex"] == ["^(?!gradient).*weight"]
    assert found["in_weights"] == ["Net_fc1.weight"]
    assert found["in_custom"] == ["counts"]
    assert json.loads(json.dumps(expected["values"])) == found["values"]


def test_records_with_tfs_value_fields_decode() -> None:
    # TensorFlow writers may store small tensors in float_val/int64_val/bool_val instead of
    # tensor_content; smdebug's protobuf classes build such events here.
    found = run_reference(
        "smdebug",
        """
        import json
        from smdebug.core.tfevent.proto.event_pb2 import Event
        from smdebug.core.tfevent.proto.summary_pb2 import Summary
        from smdebug.core.tfevent.proto.tensor_pb2 import TensorProto
        from smdebug.core.tfevent.proto.tensor_shape_pb2 import TensorShapeProto

        def event(tag, **fields):
            dims = [TensorShapeProto.Dim(size=2)]
            tensor = TensorProto(tensor_shape=TensorShapeProto(dim=dims), **fields)
            summary = Summary(value=[Summary.Value(tag=tag, tensor=tensor)])
            return Event(wall_time=5.0, step=3, summary=summary).SerializeToString().hex()

        print(json.dumps([
            event("f", dtype=1, float_val=[1.5, -2.0]),
            event("i", dtype=9, int64_val=[-(2**40), 7]),
            event("b", dtype=10, bool_val=[True, False]),
            event("one", dtype=2, double_val=[4.25]),
        ]))
        """,
    )
    assert isinstance(found, list)
    values = [decode_tensor_event(bytes.fromhex(payload)) for payload in found]
    assert [v.name for v in values] == ["f", "i", "b", "one"]
    assert all((v.step, v.mode, v.mode_step) == (3, ModeKeys.GLOBAL, 3) for v in values)
    np.testing.assert_array_equal(values[0].value(), np.array([1.5, -2.0], dtype=np.float32))
    np.testing.assert_array_equal(values[1].value(), np.array([-(2**40), 7], dtype=np.int64))
    np.testing.assert_array_equal(values[2].value(), np.array([True, False]))
    np.testing.assert_array_equal(values[3].value(), np.array([4.25, 4.25]))
