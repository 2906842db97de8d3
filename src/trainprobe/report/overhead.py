"""The report's debugger overhead: what trainprobe's hook cost the training.

Each training process's hook records its own time per step (on the training thread: what the
training waited for), apart from it any time it waited for the device, and the bytes its writer
wrote (``trainprobe.storage.hook_overhead``). The share compares the hook's own time with the
training's (first step to last); a wait for the device is shown beside it, never in it, since the
device was running the training's own work meanwhile. When a hook stopped saving (a full disk),
``SavingStopped`` says where and why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainprobe.report.records import Envelope, Record, Summary
from trainprobe.report.series import envelope, summary
from trainprobe.storage.hook_overhead import read_hook_overhead, saving_stopped_message

__all__ = ["DebuggerOverhead", "WorkerOverhead", "debugger_overhead"]


@dataclass(frozen=True)
class WorkerOverhead(Record):
    """What one worker's hook cost: its time per step, the bytes written, its waits."""

    worker: str
    steps: int
    total_seconds: float
    mean_ms_per_step: float
    bytes_written: int
    blocked_seconds: float
    percent_of_training: float | None
    ms_per_step: Summary
    plot: Envelope
    device_wait_seconds: float
    mean_device_wait_ms_per_step: float
    device_wait_plot: Envelope | None


@dataclass(frozen=True)
class DebuggerOverhead(Record):
    """The section: each worker's cost, and where and why saving stopped, if it did."""

    workers: list[WorkerOverhead]
    saving_stopped: str | None


def debugger_overhead(debug_output: str, training_s: float | None) -> DebuggerOverhead:
    """The section's content: one entry per worker."""
    workers = []
    records = read_hook_overhead(debug_output)
    for record in records:
        steps = np.array(record.step, dtype=np.float64)
        milliseconds = np.array(record.seconds, dtype=np.float64) * 1000.0
        waits = np.array(record.device_wait, dtype=np.float64) * 1000.0
        workers.append(
            WorkerOverhead(
                worker=record.worker,
                steps=record.steps,
                total_seconds=record.total_seconds,
                mean_ms_per_step=record.mean_seconds_per_step * 1000.0,
                bytes_written=record.bytes_written,
                blocked_seconds=record.blocked_seconds,
                percent_of_training=(
                    record.total_seconds / training_s * 100.0 if training_s else None
                ),
                ms_per_step=summary(milliseconds),
                plot=envelope(steps, milliseconds),
                device_wait_seconds=record.device_wait_seconds,
                mean_device_wait_ms_per_step=(
                    record.device_wait_seconds / record.steps * 1000.0 if record.steps else 0.0
                ),
                device_wait_plot=envelope(steps, waits) if waits.size else None,
            )
        )
    return DebuggerOverhead(workers, saving_stopped_message(records))
