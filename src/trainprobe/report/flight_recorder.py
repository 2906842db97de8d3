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

from dataclasses import dataclass

from trainprobe.analysis.profiling_data.flight_captures import CaptureComparison, compare_captures
from trainprobe.report.records import Record
from trainprobe.storage.contention_notes import ContentionNote, read_contention_notes
from trainprobe.storage.flight_captures import CapturedStep
from trainprobe.storage.training_stacks import ProcessStacks, read_stacks

__all__ = [
    "CaptureRow",
    "CapturedStepRow",
    "ComparisonStepRow",
    "ContentionRow",
    "FlightRecorderSection",
    "OperatorDifferenceRow",
    "PhaseDifferenceRow",
    "StacksRow",
    "ThreadRow",
    "flight_recorder",
]


@dataclass(frozen=True)
class CapturedStepRow(Record):
    """A step of a capture, the slow step that triggered it, or the ordinary step it is
    explained against: ``where`` names it as the training counts it (``TRAIN step 16``)."""

    step: int
    mode: str
    mode_step: int | None
    where: str
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
    ordinary_step: CapturedStepRow | None
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
class ContentionRow(Record):
    """Slow steps put down to a busy machine (one note: consecutive steps), not profiled."""

    node: str
    mode: str
    first_step: int
    last_step: int
    duration_seconds: float
    median_seconds: float
    ran_seconds: float
    waited_seconds: float
    load: float | None
    cores: int
    words: str


@dataclass(frozen=True)
class FlightRecorderSection(Record):
    """The section: the captures, the contention notes (and, by node, how many more slow steps
    were put down to a busy machine than noted) and the stacks written, oldest first."""

    captures: list[CaptureRow]
    contention: list[ContentionRow]
    contention_not_kept: dict[str, int]
    stacks: list[StacksRow]


def flight_recorder(profiler_output: str) -> FlightRecorderSection:
    """The section's content, oldest first."""
    notes = read_contention_notes(profiler_output)
    return FlightRecorderSection(
        captures=[_capture(found) for found in compare_captures(profiler_output)],
        contention=sorted(
            (_note(note) for node in notes for note in node.notes),
            key=lambda note: (note.first_step, note.node),
        ),
        contention_not_kept={node.node: node.more for node in notes if node.more},
        stacks=[_stacks(stacks) for stacks in read_stacks(profiler_output)],
    )


def _note(note: ContentionNote) -> ContentionRow:
    return ContentionRow(
        node=note.node,
        mode=note.mode.upper(),
        first_step=note.first_step,
        last_step=note.last_step,
        duration_seconds=note.duration_s,
        median_seconds=note.median_s,
        ran_seconds=note.ran_s,
        waited_seconds=note.waited_s,
        load=note.load,
        cores=note.cores,
        words=note.words(),
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
    return CapturedStepRow(step.step, step.mode, step.mode_step, step.words(), step.duration_s)


def _capture(found: CaptureComparison) -> CaptureRow:
    capture = found.capture
    compared = capture.comparison
    comparison = (
        None
        if compared is None
        else ComparisonStepRow(
            compared.step,
            compared.mode,
            compared.mode_step,
            compared.words(),
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
        steps=[row for row in map(_step, capture.steps) if row is not None],
        files=[name for name in files if name is not None],
        comparison=comparison,
        slow_step=_step(capture.slow_step),
        ordinary_step=_step(found.ordinary),
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
