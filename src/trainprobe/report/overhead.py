"""The report's debugger overhead: what trainprobe's hook cost the training.

Each training process's hook records its own time per step (on the training thread: what the
training waited for) and the bytes its writer wrote (``trainprobe.storage.hook_overhead``).
The share compares the hook's time with the training's (first step to last). When a hook
stopped saving (a full disk), ``SavingStopped`` says where and why.
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
        milliseconds = np.array(record.seconds, dtype=np.float64) * 1000.0
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
                "Plot": envelope(np.array(record.step, dtype=np.float64), milliseconds),
            }
        )
    return {"Workers": workers, "SavingStopped": saving_stopped_message(records)}
