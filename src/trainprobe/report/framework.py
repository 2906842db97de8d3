"""The report's framework summary: where the training's time went.

From the timeline, as OverallFrameworkMetrics added it up: the share of each phase (data loading,
forward, backward, optimizer) and the events with the most time. From the detailed profiles
(torch.profiler): the operators and GPU kernels with the most time. From the Python profiles:
the functions with the most time (of one profiler and clock, the one with the most profiles).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from trainprobe.analysis.profiling_data.detailed_traces import (
    list_detailed_traces,
    read_trace_events,
)
from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.analysis.profiling_data.python_profiles import (
    FunctionStats,
    ProfileUnreadable,
    PythonProfile,
    add_up,
    read_functions,
)
from trainprobe.report.records import Record
from trainprobe.report.series import rounded

__all__ = [
    "EventTime",
    "FrameworkSummary",
    "FunctionTime",
    "OperatorTime",
    "PhaseTime",
    "TopFunctions",
    "framework_summary",
]

LISTED = 15
_OPERATOR_KINDS = {"cpu_op": "CPU operator", "kernel": "GPU kernel", "gpu_memcpy": "GPU copy"}


@dataclass(frozen=True)
class PhaseTime(Record):
    """A phase's share of the step (as OverallFrameworkMetrics measured it)."""

    phase: str
    time_ms: float | None
    percent_of_step_time: Any


@dataclass(frozen=True)
class EventTime(Record):
    """One of the events with the most time (OverallFrameworkMetrics' figures)."""

    phase: Any
    name: Any
    time_ms: float | None
    count: Any
    percent: Any


@dataclass(frozen=True)
class OperatorTime(Record):
    """An operator or kernel's time over every detailed profile."""

    kind: str
    name: str
    time_ms: float
    count: int


@dataclass(frozen=True)
class FunctionTime(Record):
    """A Python function's calls and time over the chosen profiles."""

    function: str
    file: str
    line: int
    calls: int | None
    cumulative_s: float | None
    own_s: float | None


@dataclass(frozen=True)
class TopFunctions(Record):
    """The functions with the most time, in the profiles of one profiler and clock."""

    profiler: str
    timer: str | None
    profiles: int
    functions: list[FunctionTime]


@dataclass(frozen=True)
class FrameworkSummary(Record):
    """The section (see the module docstring)."""

    step_time_ms: float | None
    phase_split: list[PhaseTime]
    top_events: list[EventTime]
    cpu_vs_gpu: Any
    top_operators: list[OperatorTime]
    top_functions: TopFunctions | None


def framework_summary(output: ProfilerOutput, overall: dict[str, Any] | None) -> FrameworkSummary:
    """The section's content; ``overall`` is OverallFrameworkMetrics' report details."""
    details = overall or {}
    return FrameworkSummary(
        step_time_ms=_ms(details.get("step_time_us")),
        phase_split=[
            PhaseTime(phase, _ms(entry.get("time_us")), entry.get("percent_of_step_time"))
            for phase, entry in (details.get("step_split") or {}).items()
        ],
        top_events=[
            EventTime(
                phase=event.get("phase"),
                name=event.get("name"),
                time_ms=_ms(event.get("time_us")),
                count=event.get("count"),
                percent=event.get("percent"),
            )
            for event in details.get("top_events") or []
        ],
        cpu_vs_gpu=details.get("cpu_vs_gpu"),
        top_operators=_top_operators(output),
        top_functions=_top_functions(output),
    )


def _ms(value: Any) -> float | None:
    return round(float(value) / 1000.0, 3) if isinstance(value, int | float) else None


def _top_operators(output: ProfilerOutput) -> list[OperatorTime]:
    """The operators and kernels with the most time over every detailed profile."""
    time_us: dict[tuple[str, str], float] = {}
    count: Counter[tuple[str, str]] = Counter()
    for trace in list_detailed_traces(output.path):
        for event in read_trace_events(trace):
            kind = _OPERATOR_KINDS.get(str(event.get("cat", "")).lower())
            duration = event.get("dur")
            if kind is None or not isinstance(duration, int | float):
                continue
            key = (kind, str(event.get("name", "")))
            time_us[key] = time_us.get(key, 0.0) + duration
            count[key] += 1
    return [
        OperatorTime(kind, name, round(total / 1000.0, 3), count[(kind, name)])
        for (kind, name), total in sorted(time_us.items(), key=lambda item: -item[1])[:LISTED]
    ]


def _top_functions(output: ProfilerOutput) -> TopFunctions | None:
    """The functions with the most cumulative time in the most common kind of Python profile."""
    profiles = output.python_profiles()
    kinds = Counter((profile.profiler, profile.timer) for profile in profiles)
    if not kinds:
        return None
    (profiler, timer), _ = kinds.most_common(1)[0]
    chosen = [p for p in profiles if (p.profiler, p.timer) == (profiler, timer)]
    functions = add_up(_functions(profile) for profile in chosen)
    functions.sort(key=lambda function: -function.cumulative_s)
    return TopFunctions(
        profiler=profiler,
        timer=timer,
        profiles=len(chosen),
        functions=[
            FunctionTime(
                function=function.function,
                file=function.filename,
                line=function.line,
                calls=function.calls,
                cumulative_s=rounded([function.cumulative_s])[0],
                own_s=rounded([function.own_s])[0],
            )
            for function in functions[:LISTED]
        ],
    )


def _functions(profile: PythonProfile) -> list[FunctionStats]:
    try:
        return read_functions(profile)
    except (ProfileUnreadable, OSError):
        return []  # a profile being written, or damaged: the others still count
