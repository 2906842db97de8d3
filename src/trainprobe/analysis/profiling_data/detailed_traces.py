"""The detailed profiling traces of a job: torch.profiler's Chrome traces, found and read.

They are at ``framework/<framework>/detailed_profiling/<YYYYMMDDHH>/<startstep:09>/
<node>.<startUs>.pt.trace.json`` (``trainprobe.storage.trace_file``). PyTorch writes a JSON object
whose ``traceEvents`` have ``ts`` in microseconds after ``baseTimeNanoseconds`` (older versions:
a bare list, or no base, with ``ts`` already since the epoch); ``read_trace_events`` gives every
event with ``ts`` in microseconds since the epoch, so it lines up with the other profiler data.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trainprobe.storage import files
from trainprobe.storage.job_layout import FRAMEWORK_METRICS_DIR
from trainprobe.storage.locations import join

__all__ = ["DetailedTrace", "list_detailed_traces", "read_trace_events"]

_PATH = re.compile(
    r"^([^/]+)/detailed_profiling/\d{10}/(\d+)/(.+)\.(\d+(?:\.\d+)?)\.pt\.trace\.json$"
)


@dataclass(frozen=True)
class DetailedTrace:
    """One torch.profiler trace: its file, node, first step and when it started."""

    path: str
    framework: str
    node_id: str
    start_step: int
    start_us: float


def list_detailed_traces(out_dir: str) -> list[DetailedTrace]:
    """Every detailed profiling trace under a profiler output directory, by start time."""
    root = join(out_dir, FRAMEWORK_METRICS_DIR)
    found = []
    for relative in files.list_files(root, ".pt.trace.json"):
        match = _PATH.match(relative)
        if match is None:
            continue
        framework, step, node_id, start = match.groups()
        found.append(
            DetailedTrace(join(root, relative), framework, node_id, int(step), float(start))
        )
    found.sort(key=lambda trace: (trace.start_us, trace.node_id))
    return found


def read_trace_events(trace: DetailedTrace) -> list[dict[str, Any]]:
    """The trace's events, ``ts`` in microseconds since the epoch; [] for a broken file."""
    try:
        content = json.loads(files.read_bytes(trace.path))
    except (OSError, ValueError):
        return []
    base_us = 0.0
    if isinstance(content, dict):
        base = content.get("baseTimeNanoseconds")
        if isinstance(base, (int, float)) and not isinstance(base, bool):
            base_us = base / 1000.0
        content = content.get("traceEvents")
    if not isinstance(content, list):
        return []
    events = []
    for event in content:
        if not isinstance(event, dict):
            continue
        ts = event.get("ts")
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            event = {**event, "ts": base_us + ts}
        events.append(event)
    return events
