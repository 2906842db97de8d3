"""The profiler's records as pandas DataFrames: the one place pandas is imported.

pandas is the ``profiler`` extra (``pip install trainprobe[profiler]``); without it, importing
this module says so. Columns, with times in microseconds since the epoch:

- system metrics: ``timestamp_us, node_id, type, name, dimension, value, step, mode, mode_step,
  step_node_id``;
- framework events: ``node_id, host, phase, name, start_us, end_us, duration_us, step, mode,
  mode_step, pid, tid, args``; ``pid`` is the process that did the work (a data loader worker's
  own), ``args`` the event's arguments as a dict;
- steps: ``node_id, mode, step, mode_step, start_us, end_us, duration_us, wait_us``;
- Python profiles: ``node_id, profiler, timer, start_mode, start_step, start_phase, start_us,
  end_mode, end_step, end_phase, end_us, duration_us, directory``;
- functions: ``function, filename, line, calls, primitive_calls, own_s, cumulative_s``.

Steps are nullable integers (``Int64``): a record outside every step has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    import pandas as pd
except ImportError as error:  # pragma: no cover - the extra is installed where tests run
    raise ImportError(
        "trainprobe's profiler data frames need pandas: pip install 'trainprobe[profiler]'"
    ) from error

from trainprobe.analysis.profiling_data.output import PlacedEvent, PlacedReading
from trainprobe.analysis.profiling_data.python_profiles import FunctionStats, PythonProfile
from trainprobe.analysis.profiling_data.steps import StepSpan

__all__ = [
    "EVENT_COLUMNS",
    "FUNCTION_COLUMNS",
    "PROFILE_COLUMNS",
    "STEP_COLUMNS",
    "SYSTEM_COLUMNS",
    "events_frame",
    "functions_frame",
    "profiles_frame",
    "steps_frame",
    "system_frame",
]

SYSTEM_COLUMNS = [
    "timestamp_us",
    "node_id",
    "type",
    "name",
    "dimension",
    "value",
    "step",
    "mode",
    "mode_step",
    "step_node_id",
]
EVENT_COLUMNS = [
    "node_id",
    "host",
    "phase",
    "name",
    "start_us",
    "end_us",
    "duration_us",
    "step",
    "mode",
    "mode_step",
    "pid",
    "tid",
    "args",
]
STEP_COLUMNS = [
    "node_id",
    "mode",
    "step",
    "mode_step",
    "start_us",
    "end_us",
    "duration_us",
    "wait_us",
]
PROFILE_COLUMNS = [
    "node_id",
    "profiler",
    "timer",
    "start_mode",
    "start_step",
    "start_phase",
    "start_us",
    "end_mode",
    "end_step",
    "end_phase",
    "end_us",
    "duration_us",
    "directory",
]
FUNCTION_COLUMNS = [
    "function",
    "filename",
    "line",
    "calls",
    "primitive_calls",
    "own_s",
    "cumulative_s",
]
_FLOATS = ("timestamp_us", "value", "start_us", "end_us", "duration_us", "wait_us")
_DTYPES: dict[str, Any] = {
    **dict.fromkeys(_FLOATS, "float64"),
    **dict.fromkeys(("own_s", "cumulative_s"), "float64"),
    **dict.fromkeys(("line", "tid"), "int64"),
    **dict.fromkeys(
        ("step", "mode_step", "start_step", "end_step", "calls", "primitive_calls", "pid"),
        "Int64",
    ),
    "args": object,
}


def _frame(columns: list[str], rows: Sequence[Sequence[Any]]) -> Any:
    """A DataFrame of ``rows``: numbers as numbers (steps nullable), everything else text."""
    return pd.DataFrame(
        {
            name: pd.Series([row[i] for row in rows], dtype=_DTYPES.get(name, "string"))
            for i, name in enumerate(columns)
        }
    )


def system_frame(readings: Sequence[PlacedReading]) -> Any:
    """System readings, one row each, by time."""
    rows = [
        (
            r.reading.timestamp * 1e6,
            r.reading.node_id,
            r.reading.type,
            r.reading.name,
            r.reading.dimension,
            r.reading.value,
            r.step.step,
            r.step.mode,
            r.step.mode_step,
            r.step_node_id,
        )
        for r in readings
    ]
    return _frame(SYSTEM_COLUMNS, rows)


def _pid(args: dict[str, Any]) -> int | None:
    value = args.get("pid")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def events_frame(events: Sequence[PlacedEvent]) -> Any:
    """Framework events, one row each, by start time."""
    rows = [
        (
            e.event.node_id,
            e.host,
            e.event.phase,
            e.event.name,
            e.event.start_us,
            e.event.end_us,
            e.event.duration_us,
            e.step.step,
            e.step.mode,
            e.step.mode_step,
            _pid(e.event.args),
            e.event.tid,
            e.event.args,
        )
        for e in events
    ]
    return _frame(EVENT_COLUMNS, rows)


def steps_frame(spans: Sequence[StepSpan]) -> Any:
    """Steps, one row each, by node then time."""
    rows = [
        (
            s.node_id,
            s.mode,
            s.step,
            s.mode_step,
            s.start_us,
            s.end_us,
            s.duration_us,
            s.wait_us,
        )
        for s in spans
    ]
    return _frame(STEP_COLUMNS, rows)


def profiles_frame(profiles: Sequence[PythonProfile]) -> Any:
    """Python profiles, one row each, by start time."""
    rows = [
        (
            p.node_id,
            p.profiler,
            p.timer,
            p.start.mode,
            p.start.step,
            p.start.phase,
            p.start.time_us,
            p.end.mode,
            p.end.step,
            p.end.phase,
            p.end.time_us,
            p.duration_us,
            p.directory,
        )
        for p in profiles
    ]
    return _frame(PROFILE_COLUMNS, rows)


def functions_frame(functions: Sequence[FunctionStats], by: str, limit: int | None) -> Any:
    """Functions, the ones with the most ``by`` time (``own_s`` or ``cumulative_s``) first."""
    ordered = sorted(functions, key=lambda f: (-getattr(f, by), f.function, f.filename, f.line))
    if limit is not None:
        ordered = ordered[:limit]
    rows = [
        (f.function, f.filename, f.line, f.calls, f.primitive_calls, f.own_s, f.cumulative_s)
        for f in ordered
    ]
    return _frame(FUNCTION_COLUMNS, rows)
