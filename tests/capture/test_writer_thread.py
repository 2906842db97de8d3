"""The writer thread: bounded memory (back-pressure), failures isolated, bytes counted, and the
next records' device copies and checksums overlapping the writes (the CUDA event faked)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from trainprobe.capture import writer_thread
from trainprobe.capture.pytorch.host_copy import HostCopy
from trainprobe.capture.writer_thread import (
    AHEAD_MIN_BYTES,
    CollectionsJob,
    EndStep,
    ScalarBatch,
    SideJob,
    TensorRecord,
    WriterThread,
)
from trainprobe.storage.modes import ModeKeys
from trainprobe.trials import create_trial


class GatedArray:
    """A buffer whose copy 'completes' only when the gate opens (like a pending device copy)."""

    def __init__(self, gate: threading.Event, writer_box: list[WriterThread], size: int) -> None:
        self.gate = gate
        self.writer_box = writer_box
        self.array = np.zeros(size // 4, dtype=np.float32)
        self.nbytes = self.array.nbytes
        self.pending_seen: list[int] = []

    def result(self) -> np.ndarray:
        self.gate.wait()
        self.pending_seen.append(self.writer_box[0].pending_bytes)
        return self.array


def record(step: int, name: str, value: object) -> TensorRecord:
    return TensorRecord(step, name, value, ModeKeys.TRAIN, step, 1.0)  # type: ignore[arg-type]


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_full_queue_blocks_the_producer_and_memory_stays_bounded(tmp_path: Path) -> None:
    megabyte = 1 << 20
    writer = WriterThread(str(tmp_path), "worker_0", max_bytes=4 * megabyte)
    gate = threading.Event()
    box = [writer]
    arrays = [GatedArray(gate, box, megabyte) for _ in range(12)]
    submitted: list[int] = []

    def produce() -> None:
        for index, array in enumerate(arrays):
            writer.submit(record(0, f"t{index}", array))
            submitted.append(index)

    producer = threading.Thread(target=produce)
    producer.start()
    while writer.pending_bytes < 4 * megabyte:
        producer.join(0.01)
    # The writer is stuck on the first buffer, so the producer cannot have got far.
    assert producer.is_alive()
    assert len(submitted) <= 5
    gate.set()
    producer.join()
    writer.submit(EndStep(0))
    writer.close()
    assert writer.error is None
    assert max(max(a.pending_seen) for a in arrays) <= 4 * megabyte
    assert writer.blocked_seconds > 0
    written = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert writer.bytes_written == written


def test_scalars_of_a_batch_become_separate_records(tmp_path: Path) -> None:
    writer = WriterThread(str(tmp_path), "worker_0")
    writer.submit(
        ScalarBatch(
            3,
            ["smdebug/reductions/max/w", "smdebug/reductions/min/w"],
            ["float32", "float32"],
            np.array([2.5, -1.0]),
            ModeKeys.EVAL,
            1,
            1.0,
        )
    )
    writer.submit(EndStep(3))
    writer.submit(CollectionsJob({}, 1))
    writer.write_training_end()
    writer.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [3]
    assert trial.mode_modestep(3) == (ModeKeys.EVAL, 1)
    assert float(trial.tensor("w").reduction_value(3, "max")) == 2.5
    assert trial.tensor("w").reduction_value(3, "min").dtype == np.float32


def test_a_failure_keeps_earlier_steps_and_drops_the_rest(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    writer = WriterThread(str(tmp_path), "worker_0", on_error=errors.append)
    writer.submit(record(0, "good", np.arange(4.0)))
    writer.submit(EndStep(0))
    writer.submit(record(1, "first", np.arange(3.0)))
    unencodable = np.array(["2024-01-01"], dtype="datetime64[D]")
    writer.submit(record(1, "bad", unencodable))
    writer.submit(EndStep(1))
    for step in range(2, 50):
        writer.submit(record(step, "later", np.arange(3.0)))
    writer.submit(CollectionsJob({}, 1))
    writer.write_training_end()
    writer.close()
    assert len(errors) == 1 and isinstance(errors[0], TypeError)
    assert writer.error is errors[0]
    # step 0 is intact, step 1 left nothing (not even a temporary file), later steps were dropped
    assert files_under(tmp_path) == [
        os.path.join("collections", "000000000", "worker_0_collections.json"),
        os.path.join("events", "000000000000", "000000000000_worker_0.tfevents"),
        os.path.join("index", "000000000", "000000000000_worker_0.json"),
        "training_job_end.ts",
    ]
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0]
    assert trial.tensor("good").value(0).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_an_unwritable_directory_fails_once_without_blocking(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    errors: list[BaseException] = []
    writer = WriterThread(str(blocker / "out"), "worker_0", max_items=2, on_error=errors.append)
    for step in range(20):
        writer.submit(record(step, "t", np.zeros(10)))
        writer.submit(EndStep(step))
    writer.flush()
    writer.close()
    assert len(errors) == 1 and isinstance(errors[0], OSError)
    assert writer.bytes_written == 0


class FakeCopyDone:
    """The CUDA boundary: the event that marks a device-to-host copy's end. ``synchronize``
    returns once the test lets the copy finish, and says it was waited for."""

    def __init__(self) -> None:
        self.finish = threading.Event()
        self.waited = threading.Event()

    def synchronize(self) -> None:
        self.waited.set()
        if not self.finish.wait(30):
            raise TimeoutError("the fake copy was never let finish")


def arriving(values: np.ndarray, done: FakeCopyDone) -> HostCopy:
    """A host copy still arriving from a device, as ``start_copies`` makes on CUDA."""
    return HostCopy(torch.from_numpy(values), event=done, bfloat16=False)  # type: ignore[arg-type]


def test_the_next_steps_copies_are_waited_for_and_checksummed_while_a_step_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checksummed: list[str] = []
    real_encode = writer_thread.encode_tensor

    def encode(name: str, array: np.ndarray, **where: object) -> object:
        checksummed.append(name)
        return real_encode(name, array, **where)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_thread, "encode_tensor", encode)
    writer = WriterThread(str(tmp_path), "worker_0")
    first, second = FakeCopyDone(), FakeCopyDone()
    first.finish.set()
    large = np.arange(AHEAD_MIN_BYTES // 4, dtype=np.float32)
    seen_while_writing: list[bool] = []

    def writing_step_0() -> None:
        # The writer is busy with step 0: step 1's copy is waited for meanwhile, and once it
        # has arrived its large tensor is checksummed, before the writer gets to it.
        second.finish.set()
        seen_while_writing.append(second.waited.wait(30))
        deadline = time.monotonic() + 30
        while "big" not in checksummed and time.monotonic() < deadline:
            time.sleep(0.01)
        seen_while_writing.append("big" in checksummed)

    writer.submit(record(0, "w", arriving(np.arange(3, dtype=np.float32), first)))
    writer.submit(SideJob(writing_step_0))
    writer.submit(EndStep(0))
    writer.submit(record(1, "big", arriving(large.copy(), second)))
    writer.submit(EndStep(1))
    writer.submit(CollectionsJob({}, 1))
    writer.write_training_end()
    writer.close()
    assert writer.error is None
    assert seen_while_writing == [True, True]
    trial = create_trial(str(tmp_path))  # checksums verified as the values are read
    assert trial.tensor("w").value(0).tolist() == [0.0, 1.0, 2.0]
    np.testing.assert_array_equal(trial.tensor("big").value(1), large)


def test_the_look_ahead_stays_within_the_queue(tmp_path: Path) -> None:
    megabyte = 1 << 20
    writer = WriterThread(str(tmp_path), "worker_0", max_bytes=4 * megabyte)
    busy = threading.Event()
    copies = [FakeCopyDone() for _ in range(12)]
    for done in copies:
        done.finish.set()
    writer.submit(SideJob(lambda: busy.wait(30)))
    producer = threading.Thread(
        target=lambda: [
            writer.submit(record(0, f"t{index}", arriving(np.zeros(megabyte // 4, np.float32), d)))
            for index, d in enumerate(copies)
        ]
    )
    producer.start()
    while writer.pending_bytes < 4 * megabyte:
        producer.join(0.01)
    time.sleep(0.2)  # the look-ahead has had time to run as far as it may
    # While the writer is busy, no more is held than the queue holds.
    assert sum(done.waited.is_set() for done in copies) <= 5
    busy.set()
    producer.join()
    writer.submit(EndStep(0))
    writer.submit(CollectionsJob({}, 1))
    writer.close()
    assert writer.error is None
    assert all(done.waited.is_set() for done in copies)
    assert create_trial(str(tmp_path)).tensor_names() == sorted(f"t{i}" for i in range(12))


def test_a_device_copy_that_fails_fails_its_step_and_keeps_the_earlier_ones(
    tmp_path: Path,
) -> None:
    class Lost:
        nbytes = 12
        arriving = True

        def result(self) -> np.ndarray:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    errors: list[BaseException] = []
    writer = WriterThread(str(tmp_path), "worker_0", on_error=errors.append)
    writer.submit(record(0, "good", np.arange(3.0)))
    writer.submit(EndStep(0))
    writer.submit(record(1, "lost", Lost()))
    writer.submit(EndStep(1))
    writer.submit(CollectionsJob({}, 1))
    writer.write_training_end()
    writer.close()
    assert [str(error) for error in errors] == [
        "CUDA error: an illegal memory access was encountered"
    ]
    assert writer.failed_step == 1
    assert create_trial(str(tmp_path)).steps() == [0]
