"""One Chrome trace of a job's time range: system metrics, the step timeline, the detailed traces.

Perfetto (ui.perfetto.dev) and chrome://tracing open the file. What it holds, for the time of a
``Selection`` (for a step range: from the first selected step's data wait to the end of the last,
leaving out the framework events of other steps that ran in that time on other nodes):

- per host, the system metrics as counter tracks (``"ph": "C"``), one counter per Type and
  Dimension (``cpu CPUUtilization``) with one series per Name (``cpu0``, ``cpu_total``);
- per training process and phase, the timeline's events (``Step:ModeKeys.TRAIN``, ``Forward``,
  ``DataLoading``...), named ``<node> <phase>``, with their arguments;
- the torch.profiler traces that overlap the time, their processes renamed
  ``<node> torch.profiler <name>``.

Every event has ``ph``, ``ts`` and an integer ``pid``; ``ts`` is in microseconds after
``otherData.start_time_since_epoch_in_micros``. The file is written atomically.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeGuard

from trainprobe.analysis.profiling_data.detailed_traces import DetailedTrace, read_trace_events
from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.analysis.profiling_data.selection import Selection, overlaps
from trainprobe.analysis.profiling_data.steps import is_step_event
from trainprobe.config.errors import ConfigError
from trainprobe.storage import files
from trainprobe.storage.system_metrics import SystemMetric, TimeUnit
from trainprobe.storage.trace_file import START_TIME_KEY, TraceEvent

__all__ = ["MergedTimeline", "counter_name", "merge_timeline"]

_NAMED_TIDS = 1 << 30
"""Where the numbers given to threads named by text (torch.profiler's ``Spans``) start."""
_POINT_PHASES = {"i", "I", "C", "s", "t", "f", "B", "E", "b", "e", "n"}


@dataclass(frozen=True)
class MergedTimeline:
    """What ``merge_timeline`` wrote: the file, its time origin, the first start and last end
    of its events (microseconds since the epoch), and how many events of each source."""

    path: str
    origin_us: float
    start_us: float
    end_us: float
    counter_events: int
    framework_events: int
    detailed_events: int


def counter_name(reading: SystemMetric) -> str:
    """The counter a reading is drawn in: its Type, and its Dimension when that says more."""
    if reading.dimension in ("", "Algorithm"):
        return reading.type
    return f"{reading.type} {reading.dimension}"


def _clean(value: Any) -> Any:
    """``value`` with non-finite numbers (which JSON cannot hold) made None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(key): _clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean(item) for item in value]
    return value


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _Trace:
    """The merged trace being built: processes numbered in order, events with absolute times."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self._pids: dict[object, int] = {}
        self._flows: dict[object, int] = {}

    def process(self, key: object, name: str) -> int:
        pid = self._pids.get(key)
        if pid is None:
            pid = self._pids[key] = len(self._pids) + 1
            self.metadata.append(
                {"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "args": {"name": name}}
            )
            self.metadata.append(
                {
                    "name": "process_sort_index",
                    "ph": "M",
                    "ts": 0,
                    "pid": pid,
                    "tid": 0,
                    "args": {"sort_index": pid},
                }
            )
        return pid

    def flow_id(self, key: object) -> int:
        """A number for a flow (arrow) of one source trace, unique in the merged trace."""
        return self._flows.setdefault(key, len(self._flows) + 1)

    def span(self) -> tuple[float, float]:
        """The first start and the last end of the events (0, 0 without events)."""
        if not self.events:
            return 0.0, 0.0
        first = min(event["ts"] for event in self.events)
        last = max(event["ts"] + event.get("dur", 0.0) for event in self.events)
        return first, last

    def document(self, origin_us: float) -> dict[str, Any]:
        """The Chrome trace, times made relative to ``origin_us``."""
        for event in self.events:
            event["ts"] = round(event["ts"] - origin_us, 3)
        self.events.sort(key=lambda event: event["ts"])
        return {
            "traceEvents": self.metadata + self.events,
            "displayTimeUnit": "ms",
            "otherData": {START_TIME_KEY: origin_us, "written_by": "trainprobe"},
        }


def _add_counters(trace: _Trace, readings: Iterable[SystemMetric]) -> int:
    groups: dict[tuple[str, float, str], dict[str, float]] = {}
    for reading in readings:
        if math.isfinite(reading.value):
            key = (reading.node_id, reading.timestamp, counter_name(reading))
            groups.setdefault(key, {})[reading.name or reading.type] = reading.value
    for (host, timestamp, name), series in groups.items():
        pid = trace.process(("system", host), f"{host} system metrics")
        trace.events.append(
            {"name": name, "ph": "C", "ts": timestamp * 1e6, "pid": pid, "tid": 0, "args": series}
        )
    return len(groups)


def _add_framework(trace: _Trace, events: Iterable[TraceEvent]) -> int:
    count = 0
    ordered = sorted(events, key=lambda e: (e.node_id, not is_step_event(e), e.phase))
    for event in ordered:
        pid = trace.process(
            ("framework", event.node_id, event.phase), f"{event.node_id} {event.phase}"
        )
        row: dict[str, Any] = {
            "name": event.name,
            "ph": "X",
            "ts": event.start_us,
            "dur": round(max(event.duration_us, 0.0), 3),
            "pid": pid,
            "tid": event.tid,
        }
        if event.args:
            row["args"] = _clean(event.args)
        trace.events.append(row)
        count += 1
    return count


def _add_detailed(
    trace: _Trace, number: int, detailed: DetailedTrace, start_us: float, end_us: float
) -> int:
    events = read_trace_events(detailed)
    names: dict[object, str] = {}
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            names.setdefault(event.get("pid"), str((event.get("args") or {}).get("name", "")))
    tids: dict[tuple[object, object], int] = {}
    threads: set[tuple[object, ...]] = set()

    def pid_of(original: object) -> int:
        name = names.get(original) or str(original)
        label = f"{detailed.node_id} torch.profiler {name}".rstrip()
        return trace.process(("detailed", number, original), label)

    def tid_of(original_pid: object, original: object) -> int:
        if isinstance(original, int) and not isinstance(original, bool):
            return original
        key = (original_pid, original)
        if key not in tids:
            tids[key] = _NAMED_TIDS + len(tids)
        return tids[key]

    count = 0
    for event in events:
        phase = event.get("ph")
        ts = event.get("ts")
        if phase == "M":
            if event.get("name") in ("thread_name", "thread_sort_index"):
                row = dict(event, ts=0, pid=pid_of(event.get("pid")))
                row["tid"] = tid_of(event.get("pid"), event.get("tid"))
                key = (row["pid"], row["tid"], row["name"])
                if key not in threads:
                    threads.add(key)
                    trace.metadata.append(_clean(row))
            continue
        if not _number(ts) or not isinstance(phase, str):
            continue
        start = float(ts)
        duration = event.get("dur", 0.0) if phase == "X" else 0.0
        duration = float(duration) if _number(duration) else 0.0
        if not overlaps(start, start + duration, start_us, end_us):
            continue
        if phase != "X" and phase not in _POINT_PHASES:
            continue
        row = dict(event, ts=start, pid=pid_of(event.get("pid")))
        row["tid"] = tid_of(event.get("pid"), event.get("tid", 0))
        if phase == "C":
            numbers = {k: v for k, v in (event.get("args") or {}).items() if _number(v)}
            if not numbers:
                continue
            row["args"] = numbers
        if "id" in row and phase in ("s", "t", "f"):
            row["id"] = trace.flow_id((number, row["id"]))
        trace.events.append(_clean(row))
        count += 1
    return count


def merge_timeline(
    output: ProfilerOutput,
    out_file: str,
    selection: Selection,
    *,
    system: bool = True,
    framework: bool = True,
    detailed: bool = True,
) -> MergedTimeline:
    """Write the merged trace of ``selection`` to ``out_file`` (see the module docstring);
    ``system``, ``framework`` and ``detailed`` say which of the three sources it holds."""
    spans = output.steps().spans()
    bounds = selection.time_bounds(spans)
    if bounds is None:
        recorded = sorted({span.step for span in spans})
        allowed = (
            f"a range holding a recorded step: steps {recorded[0]} to {recorded[-1]}"
            if recorded
            else "a time range: the job recorded no steps"
        )
        raise ConfigError("start_step", selection.start_step, allowed)
    start_us, end_us = bounds
    readings = output.system.events(start_us, end_us, TimeUnit.MICROSECONDS) if system else []
    events = [
        placed.event
        for placed in (output.events(Selection(start_us, end_us)) if framework else [])
        if placed.step.step is None or selection.holds_step(placed.step.step, placed.step.mode)
    ]
    traces = [
        trace for trace in (output.detailed_traces() if detailed else []) if trace.start_us < end_us
    ]
    trace = _Trace()
    counters = _add_counters(trace, readings)
    framework_count = _add_framework(trace, events)
    detailed_count = sum(
        _add_detailed(trace, number, found, start_us, end_us) for number, found in enumerate(traces)
    )
    first, last = trace.span()
    origin = float(math.floor(first))
    document = trace.document(origin)
    files.write_atomic(out_file, json.dumps(document, separators=(",", ":")).encode())
    return MergedTimeline(out_file, origin, first, last, counters, framework_count, detailed_count)
