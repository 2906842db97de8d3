"""The time of each phase of a step timeline, every moment counted once.

A training's phases nest: with ``optimizer.step(closure)`` (PyTorch Lightning's automatic
optimization, LBFGS) the forward and backward passes run inside the closure, inside the optimizer's
step, so the ``Optimizer`` event (and trainprobe's ``OptimizerClosure``) spans them; smdebug's
``Forward-SubModuleInternal`` events sit inside ``Forward``; the data loader profiling's
``DataLoaderIter`` wait is the timeline's ``DataLoading`` wait again. Adding the events' durations
up counts such moments twice or more.

``PhaseTime`` credits each moment of a process to the *innermost* event running at it: the one that
started last (of two that started together, the shorter one; of two identical ones, the one whose
phase, then name, sorts last, which makes ``DataLoading`` win over ``DataLoaderIter``). An
optimizer step so keeps only its own work: not its closure's time, when the timeline records the
closure, and never the forward and backward passes; the phases of a process add up to at most the
time it was busy. Timelines already written (by smdebug, by an older trainprobe) are read right
too.

Two kinds of event stand aside. Steps (``Step:ModeKeys.<MODE>``) are the frame, not a phase:
they only add to ``covered_us``, the time in which a node was in a step or a phase (each moment
once), which is what shares of the step time are shares of. ``DataLoaderWorker`` events run in
the loader's own worker processes, beside the training: they are neither credited nor covered.

Events are added batch after batch, each batch in any order but later batches starting no earlier
than the latest start of the ones before (windows of a job give them so); a moment is credited as
soon as no event still to come can start before it. An event that starts before that point gets
only its later part.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from trainprobe.analysis.profiling_data.steps import is_step_event
from trainprobe.storage.trace_file import TraceEvent

__all__ = ["WORKER_PHASE", "PhaseTime", "is_credited"]

WORKER_PHASE = "DataLoaderWorker"

EventKey = tuple[str, str]
"""An event's (phase, name)."""


def is_credited(event: TraceEvent) -> bool:
    """Whether ``event`` is one of the training process's phases (not a step, not a worker)."""
    return not is_step_event(event) and event.phase != WORKER_PHASE


@dataclass
class _Open:
    start_us: float
    end_us: float
    key: EventKey


@dataclass
class _Node:
    """One node's events so far: what is credited, what is still open, what is covered."""

    credited_up_to_us: float = float("-inf")
    open: list[_Open] = field(default_factory=list)  # by start: the last is the innermost
    covered_us: float = 0.0
    span: tuple[float, float] | None = None  # the covered stretch still growing

    def cover(self, start_us: float, end_us: float) -> None:
        if self.span is None or start_us > self.span[1]:
            if self.span is not None:
                self.covered_us += self.span[1] - self.span[0]
            self.span = (start_us, end_us)
        else:
            self.span = (self.span[0], max(self.span[1], end_us))

    def open_event(self, entry: _Open) -> None:
        """Keep ``entry`` among the open events, in start order (it is usually the latest)."""
        if not self.open or self.open[-1].start_us <= entry.start_us:
            self.open.append(entry)
        else:
            starts = [opened.start_us for opened in self.open]
            self.open.insert(bisect.bisect_right(starts, entry.start_us), entry)

    def credit_until(self, until_us: float, credited: dict[EventKey, float]) -> None:
        """Credit the moments up to ``until_us`` to the innermost event open at each."""
        at_us = self.credited_up_to_us
        while self.open and at_us < until_us:
            top = self.open[-1]
            if top.end_us <= at_us:
                self.open.pop()
                continue
            upto_us = min(top.end_us, until_us)
            credited[top.key] += upto_us - at_us
            at_us = upto_us
        self.credited_up_to_us = max(at_us, until_us)

    def pending(self) -> tuple[dict[EventKey, float], float]:
        """What the open events and the growing stretch would add if no event came any more."""
        pending: dict[EventKey, float] = defaultdict(float)
        at_us = self.credited_up_to_us
        for entry in reversed(self.open):
            if entry.end_us > at_us:
                pending[entry.key] += entry.end_us - at_us
                at_us = entry.end_us
        covered = self.span[1] - self.span[0] if self.span is not None else 0.0
        return pending, covered


class PhaseTime:
    """Time per phase and event of a timeline, every moment counted once (module docstring)."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = defaultdict(_Node)
        self._credited: dict[EventKey, float] = defaultdict(float)

    def add(self, events: Iterable[TraceEvent]) -> None:
        """Count ``events`` in."""
        ordered = sorted(
            events, key=lambda e: (e.start_us, -max(e.duration_us, 0.0), e.phase, e.name)
        )
        for event in ordered:
            if event.phase == WORKER_PHASE:
                continue
            node = self._nodes[event.node_id]
            end_us = max(event.end_us, event.start_us)
            node.cover(event.start_us, end_us)
            if is_step_event(event):
                continue
            node.credit_until(event.start_us, self._credited)
            if end_us > node.credited_up_to_us:
                node.open_event(_Open(event.start_us, end_us, (event.phase, event.name)))

    def by_event(self) -> dict[EventKey, float]:
        """Microseconds credited to each (phase, name), the events still open included."""
        totals = dict(self._credited)
        for node in self._nodes.values():
            pending, _ = node.pending()
            for key, time_us in pending.items():
                totals[key] = totals.get(key, 0.0) + time_us
        return totals

    def by_phase(self) -> dict[str, float]:
        """Microseconds credited to each phase, the events still open included."""
        totals: dict[str, float] = defaultdict(float)
        for (phase, _), time_us in self.by_event().items():
            totals[phase] += time_us
        return dict(totals)

    @property
    def covered_us(self) -> float:
        """Microseconds in which a node was in a step or a phase, summed over the nodes."""
        return sum(node.covered_us + node.pending()[1] for node in self._nodes.values())
