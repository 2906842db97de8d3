"""Damaged output costs only what is damaged, and a damaged value is an error, never a wrong number.

Each test writes a small run with the hook's own step writer, damages one file as a disk, a copy
or an attacker might (a flipped byte, a truncation, a hostile index), and reads it back.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from trainprobe.errors import TrainprobeError
from trainprobe.exceptions import TensorRecordDamaged, TensorUnavailableForStep
from trainprobe.storage import locations
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end
from trainprobe.trials import create_trial

STEPS = [0, 1, 2, 3]
COLLECTIONS = {"all": {"include_regex": [".*"], "tensor_names": [], "save_config": None}}


def weight(step: int) -> np.ndarray:
    return (np.arange(256, dtype=np.float32).reshape(16, 16) + step) / 7


def write_run(out: Path) -> None:
    for step in STEPS:
        with StepWriter(str(out), step, "worker_0") as writer:
            writer.add("fc.weight", weight(step), mode=ModeKeys.TRAIN, mode_step=step)
            writer.add("loss", np.array(step / 10), mode=ModeKeys.TRAIN, mode_step=step)
    write_collections_file(str(out), "worker_0", COLLECTIONS, num_workers=1)
    write_training_end(str(out))


def index_path(out: Path, step: int) -> Path:
    return out / locations.index_file(step, "worker_0")


def event_path(out: Path, step: int) -> Path:
    return out / locations.event_file(step, "worker_0")


def record_of(out: Path, step: int, name: str) -> tuple[int, int]:
    index = json.loads(index_path(out, step).read_text())
    entry = next(e for e in index["tensor_payload"] if e["tensorname"] == name)
    return entry["start_idx"], entry["length"]


def warnings_about(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and text in r.getMessage()
    ]


def assert_steps_read(trial: object, steps: list[int]) -> None:
    tensor = trial.tensor("fc.weight")  # type: ignore[attr-defined]
    for step in steps:
        np.testing.assert_array_equal(tensor.value(step), weight(step))


def test_a_flipped_byte_is_a_checksum_error_naming_file_tensor_and_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_run(tmp_path)
    start, length = record_of(tmp_path, 2, "fc.weight")
    events = event_path(tmp_path, 2)
    data = bytearray(events.read_bytes())
    data[start + length // 2] ^= 0x04  # inside the tensor's values: still a valid float
    events.write_bytes(bytes(data))

    trial = create_trial(str(tmp_path))
    tensor = trial.tensor("fc.weight")
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            with pytest.raises(TensorRecordDamaged) as caught:
                tensor.value(2)
    message = str(caught.value)
    assert "fc.weight" in message and "step 2" in message
    assert str(events) in message and "checksum" in message
    assert isinstance(caught.value, TrainprobeError)
    assert isinstance(caught.value, TensorUnavailableForStep)
    assert len(warnings_about(caplog, events.name)) == 1  # logged once
    # Everything else reads, the other tensor of the damaged step included.
    assert_steps_read(trial, [0, 1, 3])
    assert float(trial.tensor("loss").value(2)) == pytest.approx(0.2)
    assert sorted(tensor.values()) == [0, 1, 3]


def test_a_truncated_event_file_loses_that_step(tmp_path: Path) -> None:
    write_run(tmp_path)
    events = event_path(tmp_path, 1)
    events.write_bytes(events.read_bytes()[:100])
    trial = create_trial(str(tmp_path))
    with pytest.raises(TensorRecordDamaged, match="step 1"):
        trial.tensor("fc.weight").value(1)
    with pytest.raises(TensorRecordDamaged, match="step 1"):
        trial.tensor("loss").value(1)
    with pytest.raises(TensorRecordDamaged, match="step 1"):
        trial.tensor("fc.weight").shape(1)
    assert_steps_read(trial, [0, 2, 3])


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda text: text[: len(text) // 2], id="truncated"),
        pytest.param(lambda text: "", id="empty"),
        pytest.param(lambda text: "[" * 100_000 + "]" * 100_000, id="deep-json"),
        pytest.param(lambda text: '{"meta": {"mode": "TRAIN"' + ', "x": [' * 5000, id="deep-cut"),
        pytest.param(lambda text: text.replace('"start_idx": 0', '"start_idx": "0"'), id="type"),
        pytest.param(lambda text: "\udcff" + text, id="not-utf8"),
    ],
)
def test_a_damaged_index_loses_exactly_its_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: object
) -> None:
    write_run(tmp_path)
    index = index_path(tmp_path, 2)
    index.write_bytes(damage(index.read_text()).encode("utf-8", "surrogateescape"))  # type: ignore[operator]
    with caplog.at_level(logging.WARNING):
        trial = create_trial(str(tmp_path))
        assert trial.steps() == [0, 1, 3]
        trial.refresh_data()
    assert_steps_read(trial, [0, 1, 3])
    assert trial.tensor("fc.weight").steps() == [0, 1, 3]
    warned = warnings_about(caplog, index.name)
    assert len(warned) == 1 and "step 2" in warned[0]


def point_index_at(out: Path, step: int, event_file: str) -> None:
    index = index_path(out, step)
    document = json.loads(index.read_text())
    document["meta"]["event_file_name"] = event_file
    index.write_text(json.dumps(document))


@pytest.mark.parametrize(
    "target",
    [
        "../outside/000000000002_worker_0.tfevents",
        "{outside}",
        "events/../../outside/x",
        "/etc/passwd",
    ],
)
def test_an_index_pointing_outside_the_trial_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, target: str
) -> None:
    out = tmp_path / "trial"
    write_run(out)
    # A readable copy of the step's event file outside the trial: it must not be followed.
    outside = tmp_path / "outside"
    outside.mkdir()
    copy = outside / "000000000002_worker_0.tfevents"
    copy.write_bytes(event_path(out, 2).read_bytes())
    point_index_at(out, 2, target.format(outside=copy))
    with caplog.at_level(logging.WARNING):
        trial = create_trial(str(out))
    assert trial.steps() == [0, 1, 3]
    assert_steps_read(trial, [0, 1, 3])
    warned = warnings_about(caplog, index_path(out, 2).name)
    assert len(warned) == 1
    assert "outside" in warned[0] or "not a path inside" in warned[0]


def test_a_symbolic_link_out_of_the_trial_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "trial"
    write_run(out)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "000000000002_worker_0.tfevents").write_bytes(event_path(out, 2).read_bytes())
    os.symlink(outside, out / "events" / "elsewhere")
    point_index_at(out, 2, "events/elsewhere/000000000002_worker_0.tfevents")
    trial = create_trial(str(out))
    assert trial.steps() == [0, 1, 3]


def test_a_damaged_collections_file_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_run(tmp_path)
    write_collections_file(str(tmp_path), "worker_1", COLLECTIONS, num_workers=1)
    (tmp_path / locations.collections_file("worker_1")).write_text('{"collections": [' * 9000)
    with caplog.at_level(logging.WARNING):
        trial = create_trial(str(tmp_path))
    assert trial.steps() == STEPS
    assert sorted(trial.collections()) == ["all"]
    assert len(warnings_about(caplog, "worker_1_collections.json")) == 1


def test_output_without_checksums_still_reads_with_a_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # As smdebug and older trainprobe wrote it: no checksum in the index, the constant footer.
    write_run(tmp_path)
    for step in STEPS:
        index = index_path(tmp_path, step)
        document = json.loads(index.read_text())
        for entry in document["tensor_payload"]:
            assert isinstance(entry.pop("masked_crc32c"), int)
        index.write_text(json.dumps(document))
    with caplog.at_level(logging.INFO):
        trial = create_trial(str(tmp_path))
        assert_steps_read(trial, STEPS)
    notes = [r.getMessage() for r in caplog.records if "without verification" in r.getMessage()]
    assert len(notes) == 1


@pytest.mark.parametrize("start, length", [(0, 2**60), (2**40, 1143), (0, 3)])
def test_an_index_entry_beyond_its_event_file_is_a_damaged_record(
    tmp_path: Path, start: int, length: int
) -> None:
    write_run(tmp_path)
    index = index_path(tmp_path, 3)
    document = json.loads(index.read_text())
    entry = next(e for e in document["tensor_payload"] if e["tensorname"] == "fc.weight")
    entry["start_idx"], entry["length"] = start, length
    index.write_text(json.dumps(document))
    trial = create_trial(str(tmp_path))
    with pytest.raises(TensorRecordDamaged, match="step 3"):
        trial.tensor("fc.weight").value(3)
    assert float(trial.tensor("loss").value(3)) == pytest.approx(0.3)
    assert_steps_read(trial, [0, 1, 2])


def flip_a_value_byte(out: Path, step: int) -> Path:
    start, length = record_of(out, step, "fc.weight")
    events = event_path(out, step)
    data = bytearray(events.read_bytes())
    data[start + length // 2] ^= 0x04
    events.write_bytes(bytes(data))
    return events


def test_a_trial_keeping_values_reads_each_record_once_and_shares_it_read_only(
    tmp_path: Path,
) -> None:
    write_run(tmp_path)
    trial = create_trial(str(tmp_path))
    tensor = trial.tensor("fc.weight")
    first, second = tensor.value(1), tensor.value(1)
    assert first is not second and first.flags.writeable  # by default each read is its own

    trial.keep_values(1024 * 1024)
    kept = tensor.value(3)
    assert tensor.value(3) is kept
    np.testing.assert_array_equal(kept, weight(3))
    with pytest.raises(ValueError, match="read-only"):
        kept[0, 0] = 1.0  # no reader can change what the others see


def test_rules_evaluated_together_each_refuse_a_damaged_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from trainprobe.rules.definition import RuleDefinition
    from trainprobe.rules.runner import RuleRunner
    from trainprobe.storage.rule_output import read_evaluations

    write_run(tmp_path / "run")
    events = flip_a_value_byte(tmp_path / "run", 2)
    rules = [
        RuleDefinition.for_builtin("AllZero", {"tensor_regex": "fc.weight"}),
        RuleDefinition.for_builtin(
            "TensorVariance", {"tensor_regex": "fc.weight", "max_threshold": "1e6"}
        ),
    ]
    output = tmp_path / "rule-output"
    with caplog.at_level(logging.WARNING):
        verdicts = RuleRunner(rules, str(tmp_path / "run"), output_dir=str(output)).run()

    assert [verdict.status for verdict in verdicts] == ["NoIssuesFound", "NoIssuesFound"]
    for verdict in verdicts:
        assert "3 step(s) evaluated" in verdict.details and "1 step(s) skipped" in verdict.details
        evaluations = read_evaluations(str(output / verdict.name))
        [damaged] = [line for line in evaluations if line["step"] == 2]
        # Neither rule judged the damaged value: each read it, and each was refused.
        assert damaged["result"] == "Skipped"
        assert "saved at TRAIN step 2" in damaged["reason"]
    [warning] = warnings_about(caplog, str(events))
    assert "does not match its checksum" in warning


def test_scalars_read_many_steps_together_lose_only_a_damaged_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_run(tmp_path)
    start, length = record_of(tmp_path, 2, "loss")
    with open(event_path(tmp_path, 2), "r+b") as file:
        file.seek(start + length - 6)  # inside the loss's value
        byte = file.read(1)
        file.seek(start + length - 6)
        file.write(bytes([byte[0] ^ 0xFF]))
    trial = create_trial(str(tmp_path))

    found = trial.values_at_steps(STEPS, ["loss", "fc.weight"])

    assert sorted(found) == [0, 1, 3]  # step 2's event file is refused whole, the others read
    for step in (0, 1, 3):
        assert found[step]["loss"] == trial.tensor("loss").value(step)
        assert found[step]["loss"].dtype == trial.tensor("loss").value(step).dtype
        assert np.array_equal(found[step]["fc.weight"], weight(step))
    assert warnings_about(caplog, "damaged")
    with pytest.raises(TensorRecordDamaged):
        trial.tensor("loss").value(2)
