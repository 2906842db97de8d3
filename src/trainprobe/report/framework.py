"""The report's framework summary: where the training's time went.

From the timeline, as OverallFrameworkMetrics added it up: the share of each phase (data loading,
forward, backward, optimizer) and the events with the most time. From the detailed profiles
(torch.profiler): the operators and GPU kernels with the most time. From the Python profiles:
the functions with the most time (of one profiler and clock, the one with the most profiles).
"""

from __future__ import annotations

from collections import Counter
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
from trainprobe.report.series import rounded

__all__ = ["framework_summary"]

LISTED = 15
_OPERATOR_KINDS = {"cpu_op": "CPU operator", "kernel": "GPU kernel", "gpu_memcpy": "GPU copy"}


def framework_summary(output: ProfilerOutput, overall: dict[str, Any] | None) -> dict[str, Any]:
    """The section's content; ``overall`` is OverallFrameworkMetrics' report details."""
    details = overall or {}
    return {
        "StepTimeMs": _ms(details.get("step_time_us")),
        "PhaseSplit": [
            {
                "Phase": phase,
                "TimeMs": _ms(entry.get("time_us")),
                "PercentOfStepTime": entry.get("percent_of_step_time"),
            }
            for phase, entry in (details.get("step_split") or {}).items()
        ],
        "TopEvents": [
            {
                "Phase": event.get("phase"),
                "Name": event.get("name"),
                "TimeMs": _ms(event.get("time_us")),
                "Count": event.get("count"),
                "Percent": event.get("percent"),
            }
            for event in details.get("top_events") or []
        ],
        "CpuVsGpu": details.get("cpu_vs_gpu"),
        "TopOperators": _top_operators(output),
        "TopFunctions": _top_functions(output),
    }


def _ms(value: Any) -> float | None:
    return round(float(value) / 1000.0, 3) if isinstance(value, int | float) else None


def _top_operators(output: ProfilerOutput) -> list[dict[str, Any]]:
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
        {
            "Kind": kind,
            "Name": name,
            "TimeMs": round(total / 1000.0, 3),
            "Count": count[(kind, name)],
        }
        for (kind, name), total in sorted(time_us.items(), key=lambda item: -item[1])[:LISTED]
    ]


def _top_functions(output: ProfilerOutput) -> dict[str, Any] | None:
    """The functions with the most cumulative time in the most common kind of Python profile."""
    profiles = output.python_profiles()
    kinds = Counter((profile.profiler, profile.timer) for profile in profiles)
    if not kinds:
        return None
    (profiler, timer), _ = kinds.most_common(1)[0]
    chosen = [p for p in profiles if (p.profiler, p.timer) == (profiler, timer)]
    functions = add_up(_functions(profile) for profile in chosen)
    functions.sort(key=lambda function: -function.cumulative_s)
    return {
        "Profiler": profiler,
        "Timer": timer,
        "Profiles": len(chosen),
        "Functions": [
            {
                "Function": function.function,
                "File": function.filename,
                "Line": function.line,
                "Calls": function.calls,
                "CumulativeS": rounded([function.cumulative_s])[0],
                "OwnS": rounded([function.own_s])[0],
            }
            for function in functions[:LISTED]
        ],
    }


def _functions(profile: PythonProfile) -> list[FunctionStats]:
    try:
        return read_functions(profile)
    except (ProfileUnreadable, OSError):
        return []  # a profile being written, or damaged: the others still count
