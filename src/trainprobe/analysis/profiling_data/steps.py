"""When each step ran on each node, and which step a moment belongs to.

The framework timeline (``trainprobe.storage.trace_file``) has one ``Step:ModeKeys.<MODE>`` event
per step and node. A step's event starts at its forward pass; the wait for its batch
(``DataLoading``, carrying the same ``global_step``) comes just before it. A step's *span* is
both: from the start of its data wait (or of the step, when it had none) to the end of the step,
so that a moment in which the training waited for a batch belongs to the step that used it.
Steps of one node never overlap, so a moment belongs to at most one span per node.

Step numbers: ``global_step`` (trainprobe's events) counts every step of every mode; files
written by smdebug carry only ``step_num`` (the step within its mode), which is used instead.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from trainprobe.storage.modes import STEP_PHASE_PREFIX
from trainprobe.storage.trace_file import TraceEvent

__all__ = [
    "DATA_WAIT_PHASE",
    "StepIndex",
    "StepSpan",
    "event_step",
    "integer_arg",
    "is_step_event",
    "step_spans",
]

DATA_WAIT_PHASE = "DataLoading"


def is_step_event(event: TraceEvent) -> bool:
    """Whether ``event`` is a step (``Step:ModeKeys.TRAIN`` and the like)."""
    return event.phase.startswith(STEP_PHASE_PREFIX)


def integer_arg(value: Any) -> int | None:
    """``value`` as a whole number (a step written as text or number), or None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def event_step(event: TraceEvent) -> int | None:
    """The global step an event names in its ``args`` (``global_step``, else ``step_num``)."""
    found = integer_arg(event.args.get("global_step"))
    return found if found is not None else integer_arg(event.args.get("step_num"))


@dataclass(frozen=True)
class StepSpan:
    """One step of one node: its mode, numbers and times (microseconds since the epoch).

    ``start_us``/``end_us`` are the step event's; ``wait_start_us`` is where its span begins
    (the start of the data wait for its batch, or ``start_us``).
    """

    node_id: str
    mode: str
    step: int
    mode_step: int | None
    start_us: float
    end_us: float
    wait_start_us: float

    @property
    def duration_us(self) -> float:
        """How long the step took (its event's duration)."""
        return self.end_us - self.start_us

    @property
    def wait_us(self) -> float:
        """How long the training waited for this step's batch before the step started."""
        return self.start_us - self.wait_start_us


def step_spans(events: Iterable[TraceEvent]) -> list[StepSpan]:
    """The steps of ``events`` (any nodes), by node and start time."""
    steps: list[TraceEvent] = []
    waits: dict[tuple[str, int], float] = {}
    for event in events:
        if is_step_event(event):
            steps.append(event)
        elif event.phase == DATA_WAIT_PHASE:
            step = integer_arg(event.args.get("global_step"))
            if step is not None:
                key = (event.node_id, step)
                waits[key] = min(waits.get(key, math.inf), event.start_us)
    spans = []
    for event in steps:
        step = event_step(event)
        if step is None:
            continue
        wait = (
            waits.get((event.node_id, step), math.inf) if "global_step" in event.args else math.inf
        )
        spans.append(
            StepSpan(
                node_id=event.node_id,
                mode=event.phase[len(STEP_PHASE_PREFIX) :],
                step=step,
                mode_step=integer_arg(event.args.get("step_num")),
                start_us=event.start_us,
                end_us=event.end_us,
                wait_start_us=min(wait, event.start_us),
            )
        )
    spans.sort(key=lambda span: (span.node_id, span.wait_start_us, span.step))
    return spans


class StepIndex:
    """Finds the step whose span holds a moment, per node."""

    def __init__(self, spans: Iterable[StepSpan]) -> None:
        by_node: dict[str, list[StepSpan]] = {}
        for span in spans:
            by_node.setdefault(span.node_id, []).append(span)
        self._spans: dict[str, list[StepSpan]] = {}
        self._starts: dict[str, npt.NDArray[np.float64]] = {}
        self._start_lists: dict[str, list[float]] = {}
        self._ends: dict[str, npt.NDArray[np.float64]] = {}
        self._by_step: dict[tuple[str, int], StepSpan] = {}
        for node_id, node_spans in by_node.items():
            node_spans.sort(key=lambda span: span.wait_start_us)
            self._spans[node_id] = node_spans
            self._start_lists[node_id] = [span.wait_start_us for span in node_spans]
            self._starts[node_id] = np.array(self._start_lists[node_id], np.float64)
            self._ends[node_id] = np.array([s.end_us for s in node_spans], np.float64)
            for span in node_spans:
                self._by_step.setdefault((node_id, span.step), span)

    @property
    def node_ids(self) -> list[str]:
        """The nodes that have steps."""
        return sorted(self._spans)

    def spans(self, node_id: str | None = None) -> list[StepSpan]:
        """Every span (of one node), by node and time."""
        if node_id is not None:
            return list(self._spans.get(node_id, []))
        return [span for node in sorted(self._spans) for span in self._spans[node]]

    def step(self, node_id: str, step: int) -> StepSpan | None:
        """The span of global step ``step`` on ``node_id``, if it was recorded."""
        return self._by_step.get((node_id, step))

    def at(self, node_id: str, time_us: float) -> StepSpan | None:
        """The span of ``node_id`` that holds ``time_us``, or None between and outside steps."""
        spans = self._spans.get(node_id)
        if not spans:
            return None
        position = bisect.bisect_right(self._start_lists[node_id], time_us) - 1
        if position >= 0 and time_us < spans[position].end_us:
            return spans[position]
        return None

    def locate(self, node_id: str, times_us: npt.NDArray[np.float64]) -> list[StepSpan | None]:
        """``at`` for many moments of one node at once."""
        spans = self._spans.get(node_id)
        if not spans or len(times_us) == 0:
            return [None] * len(times_us)
        positions = np.searchsorted(self._starts[node_id], times_us, side="right") - 1
        clipped = np.clip(positions, 0, None)
        inside = (positions >= 0) & (times_us < self._ends[node_id][clipped])
        return [
            spans[p] if ok else None
            for p, ok in zip(clipped.tolist(), inside.tolist(), strict=True)
        ]
