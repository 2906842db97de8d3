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

Events are added batch after batch, each batch in any order. An event is written when it ends,
so an outer event (an optimizer step, its closure) comes after the passes it holds, often in a
later batch: a reader following a live job reads the passes before their closure has ended. So
events are held back, and counted in start order only once they started ``HOLD_FACTOR`` times
the longest event seen (at least ``HOLD_US``) before the latest start seen; the totals count the
held events too, as if no event came any more. An event that arrives later than that gets only
its part after the moments already credited.
"""

from __future__ import annotations

import bisect
import heapq
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


HOLD_US = 1_000_000.0
"""The least time an event is held back before it is counted (microseconds)."""
HOLD_FACTOR = 4.0
"""Events are held back this many times the longest event seen so far."""


def _order(event: TraceEvent) -> tuple[float, float, str, str]:
    """Start order; of two that started together, the longer (the outer) first."""
    return (event.start_us, -max(event.duration_us, 0.0), event.phase, event.name)


def _count(event: TraceEvent, nodes: dict[str, _Node], credited: dict[EventKey, float]) -> None:
    node = nodes[event.node_id]
    end_us = max(event.end_us, event.start_us)
    node.cover(event.start_us, end_us)
    if is_step_event(event):
        return
    node.credit_until(event.start_us, credited)
    if end_us > node.credited_up_to_us:
        node.open_event(_Open(event.start_us, end_us, (event.phase, event.name)))


class PhaseTime:
    """Time per phase and event of a timeline, every moment counted once (module docstring)."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = defaultdict(_Node)
        self._credited: dict[EventKey, float] = defaultdict(float)
        self._held: list[tuple[tuple[float, float, str, str], int, TraceEvent]] = []
        self._latest_start_us = float("-inf")
        self._longest_us = 0.0
        self._added = 0

    def add(self, events: Iterable[TraceEvent]) -> None:
        """Count ``events`` in."""
        for event in events:
            if event.phase == WORKER_PHASE:
                continue
            self._latest_start_us = max(self._latest_start_us, event.start_us)
            self._longest_us = max(self._longest_us, event.duration_us)
            self._added += 1
            heapq.heappush(self._held, (_order(event), self._added, event))
        horizon_us = self._latest_start_us - max(HOLD_US, HOLD_FACTOR * self._longest_us)
        while self._held and self._held[0][0][0] < horizon_us:
            _count(heapq.heappop(self._held)[2], self._nodes, self._credited)

    def _with_held(self) -> tuple[dict[str, _Node], dict[EventKey, float]]:
        """The nodes and credits once the held events are counted too (the state is kept)."""
        if not self._held:
            return self._nodes, self._credited
        nodes: dict[str, _Node] = defaultdict(_Node)
        for node_id, node in self._nodes.items():
            nodes[node_id] = _Node(
                node.credited_up_to_us, list(node.open), node.covered_us, node.span
            )
        credited = defaultdict(float, self._credited)
        for _, _, event in sorted(self._held):
            _count(event, nodes, credited)
        return nodes, credited

    def by_event(self) -> dict[EventKey, float]:
        """Microseconds credited to each (phase, name), the events still open included."""
        nodes, credited = self._with_held()
        totals = dict(credited)
        for node in nodes.values():
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
        nodes, _ = self._with_held()
        return sum(node.covered_us + node.pending()[1] for node in nodes.values())
