"""The report's training section: every TRAIN step's loss, learning rate and gradient norm.

From the training record the PyTorch hook keeps whatever the save interval
(``storage.training_record``): each series by the step of its mode (TRAIN step N is the N-th
update), cut to at most ``series.BUCKETS`` points (each bucket's mean, minimum and maximum, so a
spike shows), with its first, last, smallest and largest values over every step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainprobe.report.series import envelope
from trainprobe.storage.training_record import GRADIENT_NORM, LEARNING_RATE, LOSS
from trainprobe.storage.written_scalars import read_training_record

__all__ = ["training_record"]

_LABELS = {LOSS: "loss", LEARNING_RATE: "learning rate", GRADIENT_NORM: "gradient norm"}


def training_record(debug_output: str) -> dict[str, Any]:
    """The section's content: ``{"Mode", "Steps", "Series": [...]}``; ``Steps`` 0 when the job
    kept no record (output written by smdebug, or a hook that did not keep it)."""
    try:
        record = read_training_record(debug_output)
    except (OSError, ValueError):
        record = None
    if record is None:
        return {"Mode": None, "Steps": 0, "Series": []}
    x = record.mode_steps.astype(np.float64)
    series = []
    for name, label in _LABELS.items():
        values = record.values[name]
        finite = np.isfinite(values)
        if not finite.any():
            continue
        kept, at = values[finite], x[finite]
        smallest, largest = int(np.argmin(kept)), int(np.argmax(kept))
        series.append(
            {
                "Name": name,
                "Label": label,
                "Count": int(kept.size),
                "First": float(kept[0]),
                "Last": float(kept[-1]),
                "Min": float(kept[smallest]),
                "MinStep": int(at[smallest]),
                "Max": float(kept[largest]),
                "MaxStep": int(at[largest]),
                "Plot": envelope(at, kept),
            }
        )
    return {"Mode": record.mode, "Steps": len(record), "Series": series}
