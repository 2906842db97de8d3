"""The report's flight recorder section: every capture, its trigger, its files, its comparison;
the slow steps put down to a busy machine; and where the training processes were stuck, when
they wrote their stacks.

Each capture (``trainprobe.analysis.profiling_data.flight_captures``) is listed with the steps it
profiled and its trace files (relative to the job's profiler output; Perfetto opens them), and,
for a slow step, the slow step's phases against the ordinary (unprofiled) step before it and the
operators whose time per step differs most between the captured steps and the profiled
comparison step. Each contention note (``trainprobe.storage.contention_notes``) says which steps,
how long they took, and how much of it the training ran and waited for a core.
"""

from __future__ import annotations

from typing import Any

from trainprobe.analysis.profiling_data.flight_captures import CaptureComparison, compare_captures
from trainprobe.storage.contention_notes import ContentionNote, read_contention_notes
from trainprobe.storage.flight_captures import CapturedStep
from trainprobe.storage.training_stacks import ProcessStacks, read_stacks

__all__ = ["flight_recorder"]


def flight_recorder(profiler_output: str) -> dict[str, Any]:
    """The section's content: ``{"Captures": [...], "Contention": [...], "Stacks": [...]}``,
    oldest first."""
    notes = read_contention_notes(profiler_output)
    return {
        "Captures": [_capture(found) for found in compare_captures(profiler_output)],
        "Contention": sorted(
            (_note(note) for node in notes for note in node.notes),
            key=lambda note: (note["FirstStep"], note["Node"]),
        ),
        "ContentionNotKept": {node.node: node.more for node in notes if node.more},
        "Stacks": [_stacks(stacks) for stacks in read_stacks(profiler_output)],
    }


def _note(note: ContentionNote) -> dict[str, Any]:
    return {
        "Node": note.node,
        "Mode": note.mode.upper(),
        "FirstStep": note.first_step,
        "LastStep": note.last_step,
        "DurationSeconds": note.duration_s,
        "MedianSeconds": note.median_s,
        "RanSeconds": note.ran_s,
        "WaitedSeconds": note.waited_s,
        "Load": note.load,
        "Cores": note.cores,
        "Words": note.words(),
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
    return {
        "Step": step.step,
        "Mode": step.mode,
        "ModeStep": step.mode_step,
        "Where": step.words(),
        "DurationSeconds": step.duration_s,
    }


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
        "OrdinaryStep": _step(found.ordinary),
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
