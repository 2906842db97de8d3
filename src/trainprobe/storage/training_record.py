"""The training record: every TRAIN step's loss, learning rate and gradient norm, kept by the hook.

The PyTorch hook keeps them at each update, from the update's summary that its in-training rules
read (``trainprobe.capture.pytorch.update_record``), whatever the save interval, in the scalar
chunks its writer keeps beside the step files (``storage.written_scalars``): four series of the
step's mode (TRAIN; GLOBAL for a script that never sets a mode), by global step, one value each
at every recorded step:

==============================  ==============================================================
``trainprobe/loss``             the step's loss as the training computed it (NaN: none found)
``trainprobe/learning_rate``    the learning rate of the optimizer's first parameter group,
                                as the update applied it
``trainprobe/gradient_norm``    the global l2 norm of the gradients the optimizer applied
``trainprobe/mode_step``        the step within its mode: TRAIN step N is the N-th update
==============================  ==============================================================

The trial reads them as scalars of those names, the report and the live view draw the first
three. No step file holds them: a chunk's ``written`` steps are those whose files were written,
and a reader of several workers takes a recorded step from the first worker that recorded it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainprobe.storage import files, locations
from trainprobe.storage.scalar_chunks import (
    ScalarChunk,
    Steps,
    Values,
    chunk_spans,
    read_spans,
)

__all__ = [
    "CHARTED",
    "GRADIENT_NORM",
    "LEARNING_RATE",
    "LOSS",
    "MODE_STEP",
    "RECORDED",
    "TrainingRecord",
    "is_recorded",
    "latest_record",
    "record_of",
]

LOSS = "trainprobe/loss"
LEARNING_RATE = "trainprobe/learning_rate"
GRADIENT_NORM = "trainprobe/gradient_norm"
MODE_STEP = "trainprobe/mode_step"
RECORDED = (LOSS, LEARNING_RATE, GRADIENT_NORM, MODE_STEP)
"""The record's series, in the order of the values of each recorded step."""
CHARTED = (LOSS, LEARNING_RATE, GRADIENT_NORM)
"""The series that are curves of the training (``MODE_STEP`` numbers the steps)."""


def is_recorded(name: str) -> bool:
    """Whether ``name`` is one of the training record's series."""
    return name in RECORDED


@dataclass(frozen=True)
class TrainingRecord:
    """The record of one mode: global ``steps``, their ``mode_steps``, and each charted series'
    values at them (``values[LOSS]``...), NaN where a step had none."""

    mode: str
    steps: Steps
    mode_steps: Steps
    values: dict[str, Values]

    def __len__(self) -> int:
        return int(self.steps.size)

    def then(self, later: TrainingRecord) -> TrainingRecord:
        """This record followed by ``later``'s steps (of the same mode)."""
        return TrainingRecord(
            self.mode,
            np.concatenate([self.steps, later.steps]),
            np.concatenate([self.mode_steps, later.mode_steps]),
            {
                name: np.concatenate([values, later.values[name]])
                for name, values in self.values.items()
            },
        )

    def tail(self, count: int) -> TrainingRecord:
        """The last ``count`` recorded steps."""
        return TrainingRecord(
            self.mode,
            self.steps[-count:],
            self.mode_steps[-count:],
            {name: values[-count:] for name, values in self.values.items()},
        )


def record_of(chunk: ScalarChunk) -> TrainingRecord | None:
    """The training record among ``chunk``'s series (of the mode with the most recorded steps,
    TRAIN before GLOBAL); None when it holds none."""
    modes = [mode for name, mode in chunk.series if name == MODE_STEP]
    if not modes:
        return None
    mode = max(modes, key=lambda mode: (chunk.series[(MODE_STEP, mode)][0].size, mode == "TRAIN"))
    steps, mode_steps = chunk.series[(MODE_STEP, mode)]
    values = {}
    for name in CHARTED:
        found = chunk.series.get((name, mode))
        values[name] = _aligned(steps, *found) if found is not None else np.full(steps.size, np.nan)
    return TrainingRecord(mode, steps, mode_steps.astype(np.int64), values)


def _aligned(steps: Steps, at: Steps, values: Values) -> Values:
    """``values`` (at steps ``at``) at ``steps``: the same steps as a rule, NaN where missing."""
    if np.array_equal(at, steps):
        return values
    found = np.full(steps.size, np.nan)
    where = np.searchsorted(steps, at)
    inside = (where < steps.size) & (steps[np.minimum(where, steps.size - 1)] == at)
    found[where[inside]] = values[inside]
    return found


def latest_record(out_dir: str, steps: int = 1) -> TrainingRecord | None:
    """The record in the newest chunk (or piece) a worker of the tensor output ``out_dir`` kept:
    the latest steps, from one listing and one small file (and the chunk before it, when the
    newest holds fewer than ``steps`` steps: a chunk has just begun); None when there is none."""
    root = locations.join(out_dir, locations.SCALARS_DIR)
    for worker in files.child_names(root):
        spans = chunk_spans(locations.join(root, worker))
        if not spans:
            continue
        newest = max(spans, key=lambda span: (span[1], -span[0]))
        found = _record_in(newest)
        if found is None:
            continue
        before = [span for span in spans if span[1] == newest[0] - 1]
        if len(found) < steps and before:
            earlier = _record_in(min(before))
            if earlier is not None and earlier.mode == found.mode:
                return earlier.then(found)
        return found
    return None


def _record_in(span: tuple[int, int, str]) -> TrainingRecord | None:
    """The record in the chunk of ``span`` (None: none, or the chunk cannot be read)."""
    chunks = read_spans([span], span[0])
    return record_of(chunks[0]) if chunks else None
