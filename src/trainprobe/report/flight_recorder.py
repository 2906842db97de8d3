"""The report's flight recorder section: every capture, its trigger, its files, its comparison;
and where the training processes were stuck, when they wrote their stacks.

Each capture (``trainprobe.analysis.profiling_data.flight_captures``) is listed with the steps it
profiled and its trace files (relative to the job's profiler output; Perfetto opens them), and,
for a slow step, the slow step's phases against an ordinary step's and the operators whose time
per step differs most between the captured steps and the ordinary one.
"""

from __future__ import annotations

from typing import Any

from trainprobe.analysis.profiling_data.flight_captures import CaptureComparison, compare_captures
from trainprobe.storage.flight_captures import CapturedStep
from trainprobe.storage.training_stacks import ProcessStacks, read_stacks

__all__ = ["flight_recorder"]


def flight_recorder(profiler_output: str) -> dict[str, Any]:
    """The section's content: ``{"Captures": [...], "Stacks": [...]}``, oldest first."""
    return {
        "Captures": [_capture(found) for found in compare_captures(profiler_output)],
        "Stacks": [_stacks(stacks) for stacks in read_stacks(profiler_output)],
    }


def _stacks(stacks: ProcessStacks) -> dict[str, Any]:
    return {
        "Node": stacks.node,
        "Time": stacks.time,
        "Step": stacks.step,
        "Reason": stacks.reason,
        "Where": stacks.where(),
        "Threads": [
            {
                "Name": thread.name,
                "Frames": [
                    f"{frame.function} ({frame.file}:{frame.line})" for frame in thread.frames
                ],
            }
            for thread in stacks.threads
        ],
    }


def _step(step: CapturedStep | None) -> dict[str, Any] | None:
    if step is None:
        return None
    return {"Step": step.step, "Mode": step.mode, "DurationSeconds": step.duration_s}


def _capture(found: CaptureComparison) -> dict[str, Any]:
    capture = found.capture
    comparison = _step(capture.comparison)
    if comparison is not None:
        comparison["File"] = _relative(capture.folder, capture.comparison_trace)
    return {
        "Trigger": capture.trigger,
        "TriggerStep": capture.trigger_step,
        "Reason": capture.reason,
        "Headline": found.headline,
        "Node": capture.node,
        "Steps": [_step(step) for step in capture.steps],
        "Files": [
            name
            for name in (
                _relative(capture.folder, capture.trace),
                _relative(capture.folder, capture.comparison_trace),
            )
            if name is not None
        ],
        "Comparison": comparison,
        "SlowStep": _step(capture.slow_step),
        "MedianSeconds": capture.median_s,
        "ThresholdSeconds": capture.threshold_s,
        "Dropped": capture.dropped,
        "Phases": [
            {
                "Phase": phase.phase,
                "OutlierSeconds": phase.outlier_s,
                "OrdinarySeconds": phase.ordinary_s,
                "DifferenceSeconds": phase.difference_s,
            }
            for phase in found.phases
        ],
        "TopOperators": [
            {
                "Name": operator.name,
                "CapturedMsPerStep": operator.captured_ms,
                "OrdinaryMsPerStep": operator.ordinary_ms,
                "DifferenceMs": operator.difference_ms,
            }
            for operator in found.operators
        ],
    }


def _relative(folder: str, name: str | None) -> str | None:
    return None if name is None else f"{folder}/{name}"
