"""The hook saves what it costs: ``<out_dir>/hook-overhead/<worker>.json``, read back by the report.

Real trainings with the hook write the file; the reader gets one record per worker and skips
files that are not overhead files. The file is rewritten during training at most once a minute;
the tests shorten that interval through the hook module's constant.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
import torch
from hook_training import Net, run

import trainprobe.pytorch as smd
from torchrun import torchrun
from trainprobe.capture import overhead as overhead_module
from trainprobe.capture.overhead import wait_for_device
from trainprobe.capture.pytorch import hook as hook_module
from trainprobe.capture.pytorch.nonfinite_guard import NonFiniteGuard
from trainprobe.storage.hook_overhead import (
    HookOverheadRecord,
    decode_hook_overhead,
    encode_hook_overhead,
    read_hook_overhead,
    write_hook_overhead,
)
from trainprobe.trials import create_trial

TRAIN, EVAL = smd.modes.TRAIN, smd.modes.EVAL


def hooked(out: Path, **options: object) -> tuple[smd.Hook, Net]:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(out, **options)  # type: ignore[arg-type]
    hook.register_module(model)
    return hook, model


def bytes_on_disk(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def record(worker: str, steps: list[int], seconds: list[float]) -> HookOverheadRecord:
    total = sum(seconds)
    return HookOverheadRecord(
        worker, len(steps), total, total / len(steps), 4096, 0.0, steps, seconds
    )


def test_a_training_writes_its_overhead_file(tmp_path: Path) -> None:
    hook, model = hooked(
        tmp_path,
        save_config=smd.SaveConfig(save_interval=2),
        include_collections=["weights", "gradients"],
    )
    run(hook, model, [(TRAIN, 5), (EVAL, 2)])
    hook.close()

    [saved] = read_hook_overhead(str(tmp_path))
    assert saved.worker == "worker_0"
    assert saved.steps == 7 and saved.step == list(range(7))
    assert len(saved.seconds) == 7 and all(seconds > 0 for seconds in saved.seconds)
    assert saved.total_seconds == pytest.approx(sum(saved.seconds), abs=1e-5)
    assert saved.mean_seconds_per_step == pytest.approx(saved.total_seconds / 7, abs=1e-6)
    assert saved.blocked_seconds >= 0
    # Every byte the hook wrote: step files, collections, end marker and this file itself.
    assert saved.bytes_written == bytes_on_disk(tmp_path) == hook.overhead.bytes_written
    # The extra directory does not disturb a trial of the tensors.
    assert create_trial(str(tmp_path)).steps() == [0, 2, 4, 5]  # EVAL counts its own steps


class StillRunningEvent:
    """A CUDA event whose step the device is still running: ``synchronize()`` returns once
    ``seconds`` have passed on the clock (moved on by hand, no real wait)."""

    def __init__(self, clock: OffsetClock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def synchronize(self) -> None:
        self.clock.offset += self.seconds


class OffsetClock:
    """``time.perf_counter`` plus however far a test has moved it on."""

    def __init__(self) -> None:
        self.real = time.perf_counter
        self.offset = 0.0

    def __call__(self) -> float:
        return self.real() + self.offset


def test_a_wait_for_the_device_is_counted_apart_from_the_hooks_own_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a GPU whose queue still holds the last step: before each update the guard waits
    # 10 s for the flags of the step before.
    clock = OffsetClock()
    monkeypatch.setattr(time, "perf_counter", clock)
    read_flags = NonFiniteGuard._read_pending

    def read_after_the_device(
        guard: NonFiniteGuard, block: bool = False, closing: bool = False
    ) -> None:
        if block and not closing:
            wait_for_device(StillRunningEvent(clock, 10.0))
        read_flags(guard, block, closing)

    monkeypatch.setattr(NonFiniteGuard, "_read_pending", read_after_the_device)
    hook, model = hooked(tmp_path)
    run(hook, model, [(TRAIN, 4)])
    hook.close()

    [saved] = read_hook_overhead(str(tmp_path))
    assert saved.step == [0, 1, 2, 3]
    # Each step's start waited once (for the step before; closing counts as no step's).
    assert saved.device_wait == pytest.approx([10.0] * 4, abs=1e-3)
    assert saved.device_wait_seconds == pytest.approx(40.0, abs=1e-3)
    # The hook's own time holds none of it.
    assert all(0 < seconds < 10.0 for seconds in saved.seconds)
    assert saved.total_seconds == pytest.approx(sum(saved.seconds), abs=1e-5)
    assert hook.overhead.device_wait_seconds == pytest.approx(40.0, abs=1e-3)


def test_a_hook_that_never_waited_for_the_device_writes_no_waits(tmp_path: Path) -> None:
    hook, model = hooked(tmp_path)
    run(hook, model, [(TRAIN, 3)])
    hook.close()

    assert b"device_wait" not in next((tmp_path / "hook-overhead").glob("*.json")).read_bytes()
    [saved] = read_hook_overhead(str(tmp_path))
    assert saved.device_wait == [] and saved.device_wait_seconds == 0.0


def test_device_waits_survive_the_file_and_a_file_without_them_reads_as_none() -> None:
    waited = HookOverheadRecord(
        "worker_0", 2, 0.003, 0.0015, 4096, 0.0, [0, 1], [0.002, 0.001],
        device_wait_seconds=0.0075, device_wait=[0.0070004, 0.0005],
    )  # fmt: skip
    decoded = decode_hook_overhead(encode_hook_overhead(waited))
    assert decoded.device_wait == [0.007, 0.0005]
    assert decoded.device_wait_seconds == 0.0075
    assert decoded.seconds == [0.002, 0.001] and decoded.total_seconds == 0.003
    # A file from before waits were counted apart, or from a CPU training.
    older = decode_hook_overhead(encode_hook_overhead(record("worker_0", [0], [0.001])))
    assert older.device_wait == [] and older.device_wait_seconds == 0.0
    with pytest.raises(ValueError, match="device_wait"):
        encode_hook_overhead(
            HookOverheadRecord("worker_0", 1, 0.1, 0.1, 0, 0.0, [0], [0.1], device_wait=[1, 2])
        )


def test_the_file_is_rewritten_during_training_by_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hook_module, "OVERHEAD_WRITE_SECONDS", 0.0)
    writes: list[tuple[str, int]] = []
    real_write = overhead_module.write_hook_overhead

    def watched_write(out_dir: str, data: bytes, worker: str) -> int:
        size = real_write(out_dir, data, worker)
        writes.append((threading.current_thread().name, size))
        return size

    monkeypatch.setattr(overhead_module, "write_hook_overhead", watched_write)
    hook, model = hooked(tmp_path, save_config=smd.SaveConfig(save_interval=1))
    run(hook, model, [(TRAIN, 3)])
    hook.flush()
    # Written at the start of every step (the interval is 0 here), with the steps finished then.
    assert [record.step for record in read_hook_overhead(str(tmp_path))] == [[0, 1]]
    hook.close()

    [saved] = read_hook_overhead(str(tmp_path))
    assert saved.step == [0, 1, 2]
    threads = [thread for thread, _ in writes]
    assert threads[:-1] == ["trainprobe-writer"] * 3  # never on the training thread
    assert threads[-1] == threading.current_thread().name  # at close, once the writer stopped
    # Earlier versions of the file count among the bytes written, as rewritten files do.
    earlier = sum(size for _, size in writes[:-1])
    assert saved.bytes_written == bytes_on_disk(tmp_path) + earlier


def test_a_failure_to_write_it_is_logged_once_and_training_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(hook_module, "OVERHEAD_WRITE_SECONDS", 0.0)
    (tmp_path / "hook-overhead").write_text("a file where the directory should go")
    hook, model = hooked(tmp_path, save_config=smd.SaveConfig(save_interval=1))
    with caplog.at_level(logging.WARNING, logger="trainprobe"):
        seen = run(hook, model, [(TRAIN, 5)])
        hook.close()
    assert len(seen.losses) == 5
    warnings = [r.getMessage() for r in caplog.records if "overhead file" in r.getMessage()]
    assert len(warnings) == 1 and "worker_0" in warnings[0]
    assert create_trial(str(tmp_path)).steps() == list(range(5))
    assert read_hook_overhead(str(tmp_path)) == []


def test_the_reader_skips_files_that_are_not_overhead_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert read_hook_overhead(str(tmp_path)) == []  # no directory: an older run
    good = encode_hook_overhead(record("worker_0", [0, 1], [0.0015, 0.0005]))
    write_hook_overhead(str(tmp_path), good, "worker_0")
    directory = tmp_path / "hook-overhead"
    (directory / "worker_1.json").write_bytes(good[: len(good) // 2])  # cut short
    (directory / "worker_2.json").write_text('{"worker": "worker_2", "step": [0], "seconds": []}')
    (directory / "worker_3.json.1a2b3c.tmp").write_bytes(good)  # a write in progress
    with caplog.at_level(logging.WARNING):
        records = read_hook_overhead(str(tmp_path))
    assert [saved.worker for saved in records] == ["worker_0"]
    assert records[0].step == [0, 1] and records[0].seconds == [0.0015, 0.0005]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert "worker_1.json" in warnings[0] and "worker_2.json" in warnings[1]


def test_workers_come_in_rank_order(tmp_path: Path) -> None:
    for rank in (10, 2, 0):
        worker = f"worker_{rank}"
        data = encode_hook_overhead(record(worker, [0], [0.001]))
        write_hook_overhead(str(tmp_path), data, worker)
    workers = [saved.worker for saved in read_hook_overhead(str(tmp_path))]
    assert workers == ["worker_0", "worker_2", "worker_10"]


def test_a_hundred_thousand_steps_stay_compact() -> None:
    steps = list(range(100_000))
    seconds = [0.000123456789 + (step % 1000) * 1e-7 for step in steps]
    data = encode_hook_overhead(record("worker_0", steps, seconds))
    assert len(data) < 2_000_000
    decoded = decode_hook_overhead(data)
    assert decoded.step == steps
    assert decoded.seconds == [round(value, 6) for value in seconds]


def test_bad_records_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="seconds"):
        encode_hook_overhead(record("worker_0", [0, 1], [0.1]))
    with pytest.raises(ValueError, match="worker"):
        write_hook_overhead("out", b"{}", "../elsewhere")


@pytest.mark.slow
def test_every_rank_of_a_distributed_training_writes_its_own(tmp_path: Path) -> None:
    torchrun(Path(__file__).with_name("ddp_training.py"), str(tmp_path), "all")
    records = read_hook_overhead(str(tmp_path))
    assert [saved.worker for saved in records] == ["worker_0", "worker_1"]
    assert all(saved.step == [0, 1, 2] for saved in records)
    assert create_trial(str(tmp_path)).workers() == ["worker_0", "worker_1"]
