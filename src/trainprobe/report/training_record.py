"""The report's training section: every TRAIN step's loss, learning rate and gradient norm.

From the training record the PyTorch hook keeps whatever the save interval
(``storage.training_record``): each series by the step of its mode (TRAIN step N is the N-th
update), cut to at most ``series.BUCKETS`` points (each bucket's mean, minimum and maximum, so a
spike shows), with its first, last, smallest and largest values over every step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainprobe.report.records import Envelope, Record
from trainprobe.report.series import envelope
from trainprobe.storage.training_record import GRADIENT_NORM, LEARNING_RATE, LOSS
from trainprobe.storage.written_scalars import read_training_record

__all__ = ["RecordedSeries", "TrainingRecordSection", "training_record"]

_LABELS = {LOSS: "loss", LEARNING_RATE: "learning rate", GRADIENT_NORM: "gradient norm"}


@dataclass(frozen=True)
class RecordedSeries(Record):
    """One series of the record (``trainprobe/loss``...): its values' count, first, last and
    extremes (with the step of its mode where each was), and its plot by step of its mode."""

    name: str
    label: str
    count: int
    first: float
    last: float
    min: float
    min_step: int
    max: float
    max_step: int
    plot: Envelope


@dataclass(frozen=True)
class TrainingRecordSection(Record):
    """The section: the record's mode (None: no record), its steps, and its series."""

    mode: str | None
    steps: int
    series: list[RecordedSeries]


def training_record(debug_output: str) -> TrainingRecordSection:
    """The section's content; no steps when the job kept no record (output written by smdebug,
    or a hook that did not keep it)."""
    try:
        record = read_training_record(debug_output)
    except (OSError, ValueError):
        record = None
    if record is None:
        return TrainingRecordSection(None, 0, [])
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
            RecordedSeries(
                name=name,
                label=label,
                count=int(kept.size),
                first=float(kept[0]),
                last=float(kept[-1]),
                min=float(kept[smallest]),
                min_step=int(at[smallest]),
                max=float(kept[largest]),
                max_step=int(at[largest]),
                plot=envelope(at, kept),
            )
        )
    return TrainingRecordSection(record.mode, len(record), series)
