"""The training record: every TRAIN step's loss, learning rate and gradient norm, kept by default.

TensorBoard's and W&B's users see every step's loss; SageMaker's default save interval (500
steps) saves one in 500. The in-training rules already take, at every update, a summary of it
(``update_summary``): the step's loss and the global l2 norm of the gradients the optimizer
applies, from their one pass over the gradients. ``UpdateRecord`` keeps those two of every TRAIN
step (GLOBAL, for a script that never sets a mode), with the learning rate of the optimizer's
first parameter group, whatever the save interval: no pass of its own, nothing read on the
training thread where reading would wait for the device.

- On the CPU the summary's values are read at once (reading them costs nothing).
- On a GPU the two values join the summary's vector, which is copied to the host once without
  blocking; the writer thread waits for that copy (``RecordedStep.values`` is a pending array),
  a step or more later, never the training thread. A learning rate held in a tensor on the
  device joins it too.

A training that updates its weights by hand (no ``torch.optim`` optimizer) has no update to
summarise: its record is taken where its backward pass ends, from the gradients that pass left,
with no learning rate (``InTrainingChecks.backward_ended``).

Each step's record goes to the hook's writer (``StepCapture.record``), which keeps it in the
scalar chunks beside the step files (``storage.training_record`` names the series). A step with
several updates (two optimizers) keeps its first.
"""

from __future__ import annotations

import time
from typing import Any, cast

import numpy as np
import torch

from trainprobe.capture.pytorch.host_copy import host_reads_are_free
from trainprobe.capture.pytorch.update_summary import UpdateSummary
from trainprobe.capture.writer_thread import RecordedStep
from trainprobe.storage.modes import ModeKeys

__all__ = ["UpdateRecord", "learning_rate_of"]

_NAN = float("nan")


def learning_rate_of(optimizer: Any) -> float | torch.Tensor:
    """The learning rate of ``optimizer``'s first parameter group (NaN when it has none): a
    number, or the tensor that holds it (a capturable optimizer's)."""
    groups = getattr(optimizer, "param_groups", None) or [{}]
    rate = groups[0].get("lr", _NAN)
    if isinstance(rate, torch.Tensor):
        return rate.detach() if rate.numel() == 1 else _NAN
    try:
        return float(rate)
    except (TypeError, ValueError):
        return _NAN


class _SummaryValues:
    """Values a summary sends to the host, from ``offset`` on: a pending array for the writer
    thread, which waits for the copy (``UpdateSummary.read``)."""

    def __init__(self, summary: UpdateSummary, offset: int, count: int) -> None:
        self.nbytes = 8 * count
        self._summary, self._offset, self._count = summary, offset, count

    def result(self) -> np.ndarray:
        values = self._summary.read()[self._offset : self._offset + self._count]
        return np.asarray(values, np.float64)


class UpdateRecord:
    """Keeps every TRAIN step's loss, learning rate and gradient norm (module docstring).

    ``take`` makes a step's ``RecordedStep``; the hook hands it to its writer once the
    summary has been sent.
    """

    def __init__(self) -> None:
        self._last_step = -1

    def take(
        self,
        optimizer: Any,
        summary: UpdateSummary,
        step: int,
        mode: ModeKeys,
        mode_step: int,
        *,
        again: bool = False,
    ) -> RecordedStep | None:
        """The record of global ``step`` (``mode_step`` of ``mode``) from the summary of its
        update by ``optimizer`` (None: an update by hand, with no learning rate), before the
        summary is sent; None for a step recorded already, unless ``again`` (a later backward
        pass of a step updated by hand: the one kept is the last)."""
        if step == self._last_step and not again:
            return None
        self._last_step = step
        loss = summary.loss
        norm: torch.Tensor | float | None = summary.gradient_norm_now
        if norm is None:
            norm = summary.gradient_norm
        rate = learning_rate_of(optimizer)
        on_device = [value for value in (norm, loss, rate) if isinstance(value, torch.Tensor)]
        if not on_device or host_reads_are_free(on_device[0].device):
            values = np.array([_read(loss), _read(norm)], np.float64)
            return RecordedStep(step, mode, mode_step, values, _read(rate), time.time())
        device = on_device[0].device
        parts = [_on(loss, device), _on(norm, device)]
        if isinstance(rate, torch.Tensor):
            parts.append(_on(rate, device))
        offset = summary.add(torch.stack(parts))
        pending = _SummaryValues(summary, offset, len(parts))
        learning_rate = _NAN if isinstance(rate, torch.Tensor) else rate  # else the third value
        return RecordedStep(step, mode, mode_step, pending, learning_rate, time.time())


def _read(value: torch.Tensor | float | None) -> float:
    """A value read on the host (NaN for none)."""
    if value is None:
        return _NAN
    if isinstance(value, torch.Tensor):
        return float(cast(float, (value if value.dim() == 0 else value.reshape(())).tolist()))
    return value


def _on(value: torch.Tensor | float | None, device: torch.device) -> torch.Tensor:
    """``value`` (detached already: the summary's) as a float64 scalar on ``device`` (NaN for
    none)."""
    if not isinstance(value, torch.Tensor):
        return torch.full((), _NAN if value is None else value, dtype=torch.float64, device=device)
    return (value if value.dim() == 0 else value.reshape(())).to(device, torch.float64)
