"""The report's flight recorder section: every capture, its trigger, its files, its comparison;
and where the training processes were stuck, when they wrote their stacks.

Each capture (``trainprobe.analysis.profiling_data.flight_captures``) is listed with the steps it
profiled and its trace files (relative to the job's profiler output; Perfetto opens them), and,
for a slow step, the slow step's phases against an ordinary step's and the operators whose time
per step differs most between the captured steps and the ordinary one.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainprobe.analysis.profiling_data.flight_captures import CaptureComparison, compare_captures
from trainprobe.report.records import Record
from trainprobe.storage.flight_captures import CapturedStep
from trainprobe.storage.training_stacks import ProcessStacks, read_stacks

__all__ = [
    "CaptureRow",
    "CapturedStepRow",
    "ComparisonStepRow",
    "FlightRecorderSection",
    "OperatorDifferenceRow",
    "PhaseDifferenceRow",
    "StacksRow",
    "ThreadRow",
    "flight_recorder",
]


@dataclass(frozen=True)
class CapturedStepRow(Record):
    """A step of a capture, or the slow step that triggered it."""

    step: int
    mode: str
    duration_seconds: float


@dataclass(frozen=True)
class ComparisonStepRow(CapturedStepRow):
    """The ordinary step a capture compares with, and its trace file (None: not kept)."""

    file: str | None


@dataclass(frozen=True)
class PhaseDifferenceRow(Record):
    """A phase's seconds in the slow step and in an ordinary one (None: no comparison)."""

    phase: str
    outlier_seconds: float
    ordinary_seconds: float | None
    difference_seconds: float


@dataclass(frozen=True)
class OperatorDifferenceRow(Record):
    """An operator's time per step in the captured steps and in the ordinary one."""

    name: str
    captured_ms_per_step: float
    ordinary_ms_per_step: float | None
    difference_ms: float


@dataclass(frozen=True)
class CaptureRow(Record):
    """One capture: why, which steps, its files, and what differed."""

    trigger: str
    trigger_step: int
    reason: str
    headline: str
    node: str
    steps: list[CapturedStepRow]
    files: list[str]
    comparison: ComparisonStepRow | None
    slow_step: CapturedStepRow | None
    median_seconds: float | None
    threshold_seconds: float | None
    dropped: list[str]
    phases: list[PhaseDifferenceRow]
    top_operators: list[OperatorDifferenceRow]


@dataclass(frozen=True)
class ThreadRow(Record):
    """A thread's stack, innermost frame last."""

    name: str
    frames: list[str]


@dataclass(frozen=True)
class StacksRow(Record):
    """Where a training process was stuck, when and why it wrote its threads' stacks."""

    node: str
    time: float
    step: int | None
    reason: str
    where: str
    threads: list[ThreadRow]


@dataclass(frozen=True)
class FlightRecorderSection(Record):
    """The section: the captures and the stacks written, oldest first."""

    captures: list[CaptureRow]
    stacks: list[StacksRow]


def flight_recorder(profiler_output: str) -> FlightRecorderSection:
    """The section's content, oldest first."""
    return FlightRecorderSection(
        captures=[_capture(found) for found in compare_captures(profiler_output)],
        stacks=[_stacks(stacks) for stacks in read_stacks(profiler_output)],
    )


def _stacks(stacks: ProcessStacks) -> StacksRow:
    return StacksRow(
        node=stacks.node,
        time=stacks.time,
        step=stacks.step,
        reason=stacks.reason,
        where=stacks.where(),
        threads=[
            ThreadRow(
                thread.name,
                [f"{frame.function} ({frame.file}:{frame.line})" for frame in thread.frames],
            )
            for thread in stacks.threads
        ],
    )


def _step(step: CapturedStep | None) -> CapturedStepRow | None:
    if step is None:
        return None
    return CapturedStepRow(step.step, step.mode, step.duration_s)


def _capture(found: CaptureComparison) -> CaptureRow:
    capture = found.capture
    compared = capture.comparison
    comparison = (
        None
        if compared is None
        else ComparisonStepRow(
            compared.step,
            compared.mode,
            compared.duration_s,
            _relative(capture.folder, capture.comparison_trace),
        )
    )
    files = (
        _relative(capture.folder, capture.trace),
        _relative(capture.folder, capture.comparison_trace),
    )
    return CaptureRow(
        trigger=capture.trigger,
        trigger_step=capture.trigger_step,
        reason=capture.reason,
        headline=found.headline,
        node=capture.node,
        steps=[CapturedStepRow(step.step, step.mode, step.duration_s) for step in capture.steps],
        files=[name for name in files if name is not None],
        comparison=comparison,
        slow_step=_step(capture.slow_step),
        median_seconds=capture.median_s,
        threshold_seconds=capture.threshold_s,
        dropped=capture.dropped,
        phases=[
            PhaseDifferenceRow(phase.phase, phase.outlier_s, phase.ordinary_s, phase.difference_s)
            for phase in found.phases
        ],
        top_operators=[
            OperatorDifferenceRow(
                operator.name,
                operator.captured_ms,
                operator.ordinary_ms,
                operator.difference_ms,
            )
            for operator in found.operators
        ],
    )


def _relative(folder: str, name: str | None) -> str | None:
    return None if name is None else f"{folder}/{name}"
