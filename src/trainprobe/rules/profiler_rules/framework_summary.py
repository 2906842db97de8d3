"""Where the training's time went, from its framework events: phases, steps and operations.

The timeline (``trainprobe.capture.pytorch.profiling.timeline``) has one phase per kind of work:
``Step:ModeKeys.<MODE>`` for the steps, ``Forward``, ``Backward(post-forward)``, ``Optimizer``,
``OptimizerClosure``, ``DataLoading`` and the data loader's ``DataLoaderIter``/``DataLoaderWorker``
events, and any phase a user records. ``FrameworkTotals`` adds events up, window after window: time
and count per phase and per event name, the time inside steps, and the job's first and last step.
``events_near`` picks the events that overlap a set of moments (the samples where a rule found a
bottleneck).

Phases nest (the forward and backward passes inside the closure of ``optimizer.step(closure)``,
inside the optimizer's step), so a phase's time is what ``analysis.profiling_data.phase_time``
credits it: each moment once, to the innermost event running at it. The step split divides the time
in which the training was in a step, waited for a batch or ran another phase (each moment once), so
its shares add up to at most 100 %.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from trainprobe.analysis.profiling_data.phase_time import PhaseTime, is_credited
from trainprobe.analysis.profiling_data.steps import is_step_event
from trainprobe.storage.modes import STEP_PHASE_PREFIX
from trainprobe.storage.trace_file import TraceEvent

__all__ = [
    "FrameworkTotals",
    "events_near",
    "step_number",
]

_DATA_PHASES = ("DataLoading", "DataLoaderIter", "DataLoaderIterInitialize")
_LISTED_EVENTS = 10
_LEAST_SHARE = 2.0  # percent of the time of all events: smaller operations are not listed


def step_number(event: TraceEvent) -> int | None:
    """The global step of an event, from its ``global_step`` or ``step_num`` argument."""
    for key in ("global_step", "step_num"):
        value = event.args.get(key)
        if value is None:
            continue
        try:
            return int(value)
        except (TypeError, ValueError):
            continue
    return None


def _share(part: float, whole: float) -> float:
    return part / whole * 100.0 if whole > 0 else 0.0


class FrameworkTotals:
    """Framework events added up (see the module docstring)."""

    def __init__(self) -> None:
        self.phase_count: dict[str, int] = defaultdict(int)
        self.event_count: dict[tuple[str, str], int] = defaultdict(int)
        self.step_time_us = 0.0
        self.steps = 0
        self.first_step_start_us: float | None = None
        self.last_step_end_us: float | None = None
        self.first_event_us: float | None = None
        self.last_event_end_us: float | None = None
        self._credited = PhaseTime()
        self._beside_us: dict[tuple[str, str], float] = defaultdict(float)  # steps, workers

    def add(self, events: Iterable[TraceEvent]) -> None:
        """Count ``events`` in."""
        batch = list(events)
        self._credited.add(batch)
        for event in batch:
            duration = max(event.duration_us, 0.0)
            key = (event.phase, event.name)
            self.phase_count[event.phase] += 1
            self.event_count[key] += 1
            if not is_credited(event):
                self._beside_us[key] += duration
            if self.first_event_us is None or event.start_us < self.first_event_us:
                self.first_event_us = event.start_us
            if self.last_event_end_us is None or event.end_us > self.last_event_end_us:
                self.last_event_end_us = event.end_us
            if is_step_event(event):
                self.steps += 1
                self.step_time_us += duration
                if self.first_step_start_us is None or event.start_us < self.first_step_start_us:
                    self.first_step_start_us = event.start_us
                if self.last_step_end_us is None or event.end_us > self.last_step_end_us:
                    self.last_step_end_us = event.end_us

    @property
    def event_time_us(self) -> dict[tuple[str, str], float]:
        """Microseconds per (phase, name): steps and loader workers whole, the others credited
        each moment once."""
        return {**self._credited.by_event(), **self._beside_us}

    @property
    def phase_time_us(self) -> dict[str, float]:
        """Microseconds per phase, as ``event_time_us`` counts them."""
        totals: dict[str, float] = defaultdict(float)
        for (phase, _), time_us in self.event_time_us.items():
            totals[phase] += time_us
        return dict(totals)

    @property
    def split_time_us(self) -> float:
        """The time the step split divides: in a step, a wait for a batch or another phase."""
        return self._credited.covered_us

    @property
    def events(self) -> int:
        """How many events were counted."""
        return sum(self.phase_count.values())

    def step_split(self) -> dict[str, dict[str, float]]:
        """Time per kind of work done for the steps, and its share of the steps' time (%).

        Each moment counts once, for the innermost phase running at it; the whole is
        ``split_time_us`` (the steps, the waits for their batches, the other phases), so the
        shares add up to at most 100 %. Data loader workers run beside the steps in other
        processes: their time is not part of the split.
        """
        whole = self.split_time_us
        return {
            phase: {"time_us": time_us, "percent_of_step_time": _share(time_us, whole)}
            for phase, time_us in sorted(self._credited.by_phase().items())
            if time_us > 0
        }

    def data_loading_share(self) -> float:
        """The share (%) of the steps' time spent waiting for batches."""
        credited = self._credited.by_phase()
        waits = sum(credited.get(phase, 0.0) for phase in _DATA_PHASES)
        return _share(waits, self.split_time_us)

    def top_events(self, count: int = _LISTED_EVENTS) -> list[dict[str, Any]]:
        """The events that took the most time, steps left out, each over 2 % of the total."""
        timed = {
            key: time_us
            for key, time_us in self.event_time_us.items()
            if not key[0].startswith(STEP_PHASE_PREFIX)
        }
        total = sum(timed.values())
        ranked = sorted(timed.items(), key=lambda item: -item[1])
        return [
            {
                "phase": phase,
                "name": name,
                "time_us": time_us,
                "count": self.event_count[(phase, name)],
                "percent": _share(time_us, total),
            }
            for (phase, name), time_us in ranked[:count]
            if _share(time_us, total) > _LEAST_SHARE
        ]

    def to_json(self) -> dict[str, Any]:
        """The totals as report data."""
        phase_time_us = self.phase_time_us
        return {
            "events": self.events,
            "steps": self.steps,
            "step_time_us": self.step_time_us,
            "split_time_us": self.split_time_us,
            "phases": {
                phase: {"time_us": phase_time_us.get(phase, 0.0), "count": count}
                for phase, count in sorted(self.phase_count.items())
            },
            "step_split": self.step_split(),
            "top_events": self.top_events(),
        }


def events_near(
    events: Sequence[TraceEvent], moments_us: Sequence[float], half_width_us: float
) -> list[TraceEvent]:
    """The events overlapping ``[t - half_width_us, t + half_width_us]`` for some moment ``t``."""
    if not moments_us:
        return []
    moments = sorted(moments_us)
    near = []
    for event in events:
        # The first moment whose span could still reach the event.
        index = bisect.bisect_left(moments, event.start_us - half_width_us)
        if index < len(moments) and moments[index] - half_width_us <= event.end_us:
            near.append(event)
    return near
