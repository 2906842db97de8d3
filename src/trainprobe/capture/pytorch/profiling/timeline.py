"""The step timeline: each step, its forward, backward and optimizer step, and the data waits.

Events (phase / name, times in microseconds since the epoch, ``args`` with the step)::

    Step:ModeKeys.<MODE>      Step:ModeKeys.<MODE>        the step, see below
    Forward                   <model class>               forward pre-hook to forward hook
    Backward(post-forward)    <model class>               first gradient of the model's output to
                                                          the end of that backward pass
    Optimizer                 <optimizer class>.step      torch.optim's step pre- to post-hook
    OptimizerClosure          <optimizer class>.step      the closure handed to the step, while it
                              closure                     runs (``optimizer.step(closure)``)
    DataLoading               <iterator class>::GetNext   the training waiting for a batch

``args`` carry ``step_num`` (the step within its mode, as text, as smdebug writes it),
``global_step``, ``mode`` and ``pid`` (the training process).

With ``optimizer.step(closure)`` (PyTorch Lightning's automatic optimization, LBFGS) the forward
and backward passes run inside the closure, inside the Optimizer event: the events nest, and a
step whose closure starts the step's forward begins inside the Optimizer event that the step's
args name. Readers credit each moment to the innermost event
(``trainprobe.analysis.profiling_data.phase_time``): the optimizer keeps its own work, the
closure its code outside the passes (the loss, a training step's own code).

A step starts at its forward pre-hook and ends where the next one's data wait starts (or, when
there is none, at the next forward pre-hook; for the last step, at the end of its last recorded
work). A wait for a batch belongs to the step that uses the batch: the next one, unless the step
still had work after the wait (a batch fetched in the middle of a step belongs to that step). So
the Step events do not overlap and the data waits sit between them, where Perfetto shows them.

Times are the host's, as smdebug's were: with a GPU, a phase ends when its work has been queued,
not run, and a later synchronisation (``loss.item()``) shows in whichever phase waits for it.

Only the owner's thread calls ``step_started``/``forward_ended``/``batch_fetched``; ``backward``
and ``optimizer_step`` may come from autograd's threads, which only append events and move the
step's last-activity time forward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.trace_file import TimelineEvent

__all__ = [
    "BACKWARD",
    "DATA_LOADING",
    "FORWARD",
    "MAX_PENDING_WAITS",
    "OPTIMIZER",
    "OPTIMIZER_CLOSURE",
    "StepRecord",
    "StepTimeline",
    "Wait",
]

FORWARD = "Forward"
BACKWARD = "Backward(post-forward)"
OPTIMIZER = "Optimizer"
OPTIMIZER_CLOSURE = "OptimizerClosure"
DATA_LOADING = "DataLoading"

MAX_PENDING_WAITS = 1024

Emit = Callable[[TimelineEvent], None]
"""Hands one event to the trace writer."""


@dataclass
class StepRecord:
    """One step as the timeline knows it."""

    step: int
    mode: ModeKeys
    mode_step: int
    start_us: float
    model: str
    last_activity_us: float
    dataloader: bool = False
    first_wait_us: float | None = None
    args: dict[str, Any] = field(default_factory=dict)
    end_us: float | None = None
    forward_start_us: float | None = None  # of the forward in progress, when not the step's


@dataclass(frozen=True)
class Wait:
    """The training waiting for a batch between two moments.

    ``name`` is the iterator's class; ``loader`` what its owner knows of the loader (kept
    instead of the iterator itself, so that a wait never keeps an iterator and its workers alive).
    """

    start_us: float
    end_us: float
    name: str
    loader: Any = None


class StepTimeline:
    """Turns the hooks' moments into the timeline's events (see the module docstring)."""

    def __init__(self, emit: Emit, pid: int) -> None:
        self._emit = emit
        self.pid = pid  # every event says which process it is
        self.current: StepRecord | None = None
        self._waits: list[Wait] = []

    def step_started(
        self,
        step: int,
        mode: ModeKeys,
        mode_step: int,
        model: str,
        start_us: float,
        previous_end_us: float,
        dataloader: bool = False,
    ) -> list[tuple[Wait, StepRecord]]:
        """A step begins at ``start_us``; the previous one ended by ``previous_end_us``.

        Returns each data wait placed with its step, for data loader profiling.
        """
        previous = self.current
        waits, self._waits = self._waits, []
        placed: list[tuple[Wait, StepRecord]] = []
        if previous is not None:
            own = [wait for wait in waits if wait.start_us < previous.last_activity_us]
            waits = waits[len(own) :]
            end = waits[0].start_us if waits else previous_end_us
            self._emit_step(previous, end)
            placed += [(wait, previous) for wait in own]
        current = StepRecord(
            step,
            mode,
            mode_step,
            start_us,
            model,
            start_us,
            dataloader,
            waits[0].start_us if waits else None,
            {"step_num": str(mode_step), "global_step": step, "mode": mode.name, "pid": self.pid},
        )
        self.current = current
        placed += [(wait, current) for wait in waits]
        for wait, record in placed:
            self._emit_wait(wait, record)
        return placed

    def forward_started(self, start_us: float) -> None:
        """Another forward of the current step began (a step of several micro-batches)."""
        if self.current is not None:
            self.current.forward_start_us = start_us

    def forward_ended(self, end_us: float) -> None:
        """The forward of the current step ended."""
        current = self.current
        if current is None:
            return
        start_us = (
            current.start_us if current.forward_start_us is None else current.forward_start_us
        )
        current.forward_start_us = None
        self._emit(TimelineEvent(FORWARD, current.model, start_us, end_us - start_us, current.args))
        current.last_activity_us = max(current.last_activity_us, end_us)

    def backward(self, record: StepRecord, start_us: float, end_us: float) -> None:
        """A backward pass through ``record``'s step ran from ``start_us`` to ``end_us``."""
        self._emit(TimelineEvent(BACKWARD, record.model, start_us, end_us - start_us, record.args))
        record.last_activity_us = max(record.last_activity_us, end_us)

    def optimizer_step(
        self, name: str, start_us: float, end_us: float, phase: str = OPTIMIZER
    ) -> None:
        """An optimizer stepped (or, ``phase`` OPTIMIZER_CLOSURE, ran its closure) during the
        current step."""
        current = self.current
        if current is None:
            return
        self._emit(TimelineEvent(phase, name, start_us, end_us - start_us, current.args))
        current.last_activity_us = max(current.last_activity_us, end_us)

    def batch_fetched(self, wait: Wait) -> None:
        """The training waited for a batch; placed with its step when the next step starts.

        Only the latest ``MAX_PENDING_WAITS`` are kept while no step starts (a loop over a
        DataLoader that never calls the model).
        """
        waits = self._waits
        waits.append(wait)
        if len(waits) > MAX_PENDING_WAITS:
            del waits[: len(waits) - MAX_PENDING_WAITS]

    def finish(self) -> list[tuple[Wait, StepRecord]]:
        """Write the last step (ending at its last recorded work) and the waits it had."""
        previous, self.current = self.current, None
        waits, self._waits = self._waits, []
        if previous is None:
            return []
        own = [wait for wait in waits if wait.start_us < previous.last_activity_us]
        self._emit_step(previous, previous.last_activity_us)
        for wait in own:
            self._emit_wait(wait, previous)
        return [(wait, previous) for wait in own]

    def _emit_wait(self, wait: Wait, record: StepRecord) -> None:
        """The training's wait for a batch, drawn in ``record``'s step."""
        duration_us = wait.end_us - wait.start_us
        name = f"{wait.name}::GetNext"
        self._emit(TimelineEvent(DATA_LOADING, name, wait.start_us, duration_us, record.args))

    def _emit_step(self, record: StepRecord, end_us: float) -> None:
        end_us = max(end_us, record.last_activity_us)
        record.end_us = end_us
        phase = record.mode.step_phase
        self._emit(
            TimelineEvent(phase, phase, record.start_us, end_us - record.start_us, record.args)
        )
