"""A job's profiler output directory, read back with every record placed in its step.

``ProfilerOutput(path)`` reads what the system monitor and the framework profiler wrote under
``path`` (SageMaker's ``<job>/profiler-output/``) through the storage layer's readers, and answers
by time or step range (``Selection``):

- system readings, each with the step and mode running on its host when it was taken (the steps
  of the host's first process, see ``nodes``); readings between steps have none;
- framework events, each with its step and mode: the step it names (``global_step``), else the
  step whose span holds its start on its node (``steps``);
- the steps themselves, the Python profiles and the detailed traces.

It follows a job in progress: every question lists the files again, and finished timeline files
are parsed once. No pandas here; ``ProfilerData`` builds the frames on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from trainprobe.analysis.profiling_data.detailed_traces import DetailedTrace, list_detailed_traces
from trainprobe.analysis.profiling_data.nodes import host_of_nodes, step_nodes
from trainprobe.analysis.profiling_data.python_profiles import PythonProfile, list_python_profiles
from trainprobe.analysis.profiling_data.selection import Selection, overlaps
from trainprobe.analysis.profiling_data.steps import (
    StepIndex,
    StepSpan,
    event_step,
    integer_arg,
    is_step_event,
    step_spans,
)
from trainprobe.config.profiler_config import ProfilingPlan
from trainprobe.storage.modes import STEP_PHASE_PREFIX
from trainprobe.storage.system_metrics import SystemMetric, SystemMetricsReader, TimeUnit
from trainprobe.storage.trace_file import TraceEvent, TraceFileReader

__all__ = ["PlacedEvent", "PlacedReading", "ProfilerOutput", "StepOf"]


@dataclass(frozen=True)
class StepOf:
    """The step a record belongs to (all None when it belongs to none)."""

    step: int | None = None
    mode: str | None = None
    mode_step: int | None = None

    @classmethod
    def of(cls, span: StepSpan | None) -> StepOf:
        """The step of ``span``."""
        return _NO_STEP if span is None else cls(span.step, span.mode, span.mode_step)


_NO_STEP = StepOf()


@dataclass(frozen=True)
class PlacedReading:
    """A system reading, the step running on its host, and that step's process."""

    reading: SystemMetric
    step: StepOf
    step_node_id: str | None


@dataclass(frozen=True)
class PlacedEvent:
    """A framework event, its step, and the host it ran on (None when not known)."""

    event: TraceEvent
    step: StepOf
    host: str | None


class ProfilerOutput:
    """The profiler output under ``path`` (see the module docstring).

    ``hosts`` places framework nodes on system hosts where their names do not
    (``{"12345-myhost": "algo-1"}``); ``plan``, the ProfilingPlan the job ran with, tells which
    clock each cProfile profile used.
    """

    def __init__(
        self,
        path: str,
        *,
        hosts: Mapping[str, str] | None = None,
        plan: ProfilingPlan | None = None,
    ) -> None:
        self.path = path
        self.hosts = dict(hosts or {})
        self.plan = plan
        self.system = SystemMetricsReader(path)
        self.timeline = TraceFileReader(path)
        self._index_key: tuple[str, ...] | None = None
        self._index = StepIndex([])

    # ----- what is there -------------------------------------------------------------------

    def system_hosts(self) -> list[str]:
        """The hosts with system metrics."""
        return sorted({entry.node_id for entry in self.system.minute_files()})

    def framework_nodes(self) -> list[str]:
        """The training processes with timeline files."""
        return sorted({entry.node_id for entry in self.timeline.files()})

    def steps(self) -> StepIndex:
        """Every step of every node, from the timeline files there are now."""
        key = tuple(entry.path for entry in self.timeline.files())
        if key != self._index_key:
            self._index = StepIndex(step_spans(self.timeline.events()))
            self._index_key = key
        return self._index

    def host_of(self) -> dict[str, str]:
        """The system host of each framework node that can be placed (``nodes``)."""
        return host_of_nodes(self.framework_nodes(), self.system_hosts(), self.hosts)

    def python_profiles(
        self, selection: Selection | None = None, node_id: str | None = None
    ) -> list[PythonProfile]:
        """The Python profiles that start in the selection (by step, mode or time)."""
        found = list_python_profiles(self.path, self.plan)
        if node_id is not None:
            found = [p for p in found if p.node_id == node_id]
        if selection is None:
            return found
        kept = []
        for profile in found:
            start = profile.start
            mode = start.mode.upper()
            if selection.by_step or selection.mode is not None:
                if selection.holds_step(start.step, mode):
                    kept.append(profile)
            elif selection.holds_time(start.time_us, profile.end.time_us):
                kept.append(profile)
        return kept

    def detailed_traces(self, node_id: str | None = None) -> list[DetailedTrace]:
        """The torch.profiler traces (of one node)."""
        found = list_detailed_traces(self.path)
        return [trace for trace in found if node_id is None or trace.node_id == node_id]

    # ----- records with their steps --------------------------------------------------------

    def readings(self, selection: Selection, host: str | None = None) -> list[PlacedReading]:
        """System readings in the selection (of one host), by time, with their steps."""
        index = self.steps()
        bounds = selection.time_bounds(index.spans())
        if bounds is None:
            return []
        readings = self.system.events(bounds[0], bounds[1], TimeUnit.MICROSECONDS, node_id=host)
        chosen = step_nodes(self.host_of(), index.node_ids)
        by_host: dict[str, list[int]] = {}
        for position, reading in enumerate(readings):
            by_host.setdefault(reading.node_id, []).append(position)
        steps: list[StepOf] = [_NO_STEP] * len(readings)
        for reading_host, positions in by_host.items():
            node_id = chosen.get(reading_host)
            if node_id is None:
                continue
            times = np.array([readings[p].timestamp * 1e6 for p in positions], np.float64)
            for position, span in zip(positions, index.locate(node_id, times), strict=True):
                steps[position] = StepOf.of(span)
        placed = []
        for reading, step in zip(readings, steps, strict=True):
            if selection.holds_step(step.step, step.mode):
                placed.append(PlacedReading(reading, step, chosen.get(reading.node_id)))
        return placed

    def events(
        self, selection: Selection, node_id: str | None = None, phase: str | None = None
    ) -> list[PlacedEvent]:
        """Framework events that overlap the selection (of one node or phase), with steps."""
        index = self.steps()
        bounds = selection.time_bounds(index.spans(node_id))
        if bounds is None:
            return []
        host_of = self.host_of()
        placed = []
        for event in self.timeline.events(bounds[0], bounds[1], node_id=node_id, phase=phase):
            if not overlaps(event.start_us, event.end_us, bounds[0], bounds[1]):
                continue
            step = self._step_of(event, index)
            if selection.holds_step(step.step, step.mode):
                placed.append(PlacedEvent(event, step, host_of.get(event.node_id)))
        return placed

    @staticmethod
    def _step_of(event: TraceEvent, index: StepIndex) -> StepOf:
        if is_step_event(event):
            return StepOf(
                event_step(event),
                event.phase[len(STEP_PHASE_PREFIX) :],
                integer_arg(event.args.get("step_num")),
            )
        global_step = event.args.get("global_step")
        if isinstance(global_step, int) and not isinstance(global_step, bool):
            span = index.step(event.node_id, global_step)
            if span is not None:
                return StepOf.of(span)
            mode = event.args.get("mode")
            return StepOf(global_step, str(mode).upper() if mode else None)
        return StepOf.of(index.at(event.node_id, event.start_us))
