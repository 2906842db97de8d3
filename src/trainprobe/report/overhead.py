"""The report's debugger overhead: what trainprobe's hook cost the training.

Each training process's hook records its own time per step (on the training thread: what the
training waited for), apart from it any time it waited for the device, and the bytes its writer
wrote (``trainprobe.storage.hook_overhead``). The share compares the hook's own time with the
training's (first step to last); a wait for the device is shown beside it, never in it, since the
device was running the training's own work meanwhile. When a hook stopped saving (a full disk),
``SavingStopped`` says where and why.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainprobe.report.series import envelope, summary
from trainprobe.storage.hook_overhead import read_hook_overhead, saving_stopped_message

__all__ = ["debugger_overhead"]


def debugger_overhead(debug_output: str, training_s: float | None) -> dict[str, Any]:
    """The section's content: one entry per worker."""
    workers = []
    records = read_hook_overhead(debug_output)
    for record in records:
        steps = np.array(record.step, dtype=np.float64)
        milliseconds = np.array(record.seconds, dtype=np.float64) * 1000.0
        waits = np.array(record.device_wait, dtype=np.float64) * 1000.0
        workers.append(
            {
                "Worker": record.worker,
                "Steps": record.steps,
                "TotalSeconds": record.total_seconds,
                "MeanMsPerStep": record.mean_seconds_per_step * 1000.0,
                "BytesWritten": record.bytes_written,
                "BlockedSeconds": record.blocked_seconds,
                "PercentOfTraining": (
                    record.total_seconds / training_s * 100.0 if training_s else None
                ),
                "MsPerStep": summary(milliseconds),
                "Plot": envelope(steps, milliseconds),
                "DeviceWaitSeconds": record.device_wait_seconds,
                "MeanDeviceWaitMsPerStep": (
                    record.device_wait_seconds / record.steps * 1000.0 if record.steps else 0.0
                ),
                "DeviceWaitPlot": envelope(steps, waits) if waits.size else None,
            }
        )
    return {"Workers": workers, "SavingStopped": saving_stopped_message(records)}
