"""What the flight recorder's captures show: the slow step explained first, then the captured steps.

For each capture (``trainprobe.storage.flight_captures``):

- **phases**: the time of each phase of the step timeline (data loading, forward, backward,
  optimizer, ...) inside the slow step that triggered it, against ``ordinary``, the last step of
  its mode before it that was not slow, largest difference first. The timeline records every step,
  and no profiler ran in either, so the slow step itself is measured as it ran, although the
  profiler only started after it;
- **operators**: per step, the time of each operator of the torch.profiler traces (CPU operators
  and, with a GPU, kernels; an operator's time includes the operators it calls) in the captured
  steps after it against the comparison step, profiled as they were, largest difference first.
  A capture without a comparison (a request, a rule) lists its steps' operators, slowest first.
  This is the detail: the steps after a one-off stall are ordinary ones, so the headline names
  the top operator only where it accounts for a tenth of the slow step's excess time or more.

The headline says what the slow step took and where the time went: the phase (or two) that took
longer than in the ordinary step, never a phase that took less; and, when no phase took longer
by a tenth of the excess, that the time went between the recorded phases.

The time of a phase in a step is the part of its events that falls inside the step's interval
(its start to the next step's start), so a data wait between two steps counts for the first.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from trainprobe.analysis.profiling_data.detailed_traces import DetailedTrace, read_trace_events
from trainprobe.analysis.profiling_data.phase_time import is_credited
from trainprobe.storage.flight_captures import Capture, CapturedStep, list_captures
from trainprobe.storage.trace_file import TraceEvent, TraceFileReader

__all__ = ["CaptureComparison", "OperatorTime", "PhaseDifference", "compare_captures"]

OPERATOR_CATEGORIES = frozenset({"cpu_op", "kernel", "gpu_memcpy", "gpu_memset"})
TOP_OPERATORS = 10


@dataclass(frozen=True)
class PhaseDifference:
    """A phase's seconds in the slow step and in the ordinary one (None: no comparison)."""

    phase: str
    outlier_s: float
    ordinary_s: float | None

    @property
    def difference_s(self) -> float:
        """How much longer the phase took in the slow step."""
        return self.outlier_s - (self.ordinary_s or 0.0)


@dataclass(frozen=True)
class OperatorTime:
    """An operator's milliseconds per step in the captured steps and in the ordinary one."""

    name: str
    captured_ms: float
    ordinary_ms: float | None

    @property
    def difference_ms(self) -> float:
        """How much more time per step the operator took in the captured steps."""
        return self.captured_ms - (self.ordinary_ms or 0.0)


EXPLAINS = 0.1
"""The share of the slow step's excess over the ordinary step that a phase (or an operator)
must account for to be named."""


@dataclass
class CaptureComparison:
    """One capture, its files, and what its steps did differently; ``ordinary`` the unprofiled
    step the slow step is explained against."""

    capture: Capture
    traces: list[str] = field(default_factory=list)
    phases: list[PhaseDifference] = field(default_factory=list)
    operators: list[OperatorTime] = field(default_factory=list)
    ordinary: CapturedStep | None = None

    @property
    def headline(self) -> str:
        """The capture in words: its trigger, what the slow step took and where the time went,
        then what the captured steps after it show."""
        capture = self.capture
        text = (
            f"{capture.trigger} at step {capture.trigger_step} on {capture.node}: {capture.reason}"
        )
        explained = self._where_the_time_went()
        if explained:
            text += f". {explained}"
        if self.operators and self._explains_the_slow_step(self.operators[0]):
            top = self.operators[0].name
            if capture.comparison is None:
                text += f"; the slowest operator of the captured steps is {top}"
            elif capture.slow_step is not None:
                text += f"; in the captured steps after it, the operator that differs most is {top}"
            else:
                text += f"; the operator that differs most is {top}"
        return text

    def _excess_s(self) -> float | None:
        """How much longer the slow step took than the ordinary step (than the median without
        one); None for a capture that no slow step triggered."""
        capture = self.capture
        if capture.slow_step is None:
            return None
        usual = self.ordinary.duration_s if self.ordinary is not None else capture.median_s
        return capture.slow_step.duration_s - (usual or 0.0)

    def _where_the_time_went(self) -> str:
        """The slow step's phases against the ordinary step's, in a sentence: the one or two that
        took longer by a tenth of the excess or more; never one that took less."""
        ordinary, excess = self.ordinary, self._excess_s()
        if ordinary is None or excess is None or not self.phases:
            return ""
        longer = [
            phase
            for phase in self.phases
            if phase.ordinary_s is not None and phase.difference_s >= EXPLAINS * max(excess, 0.0)
        ][:2]
        against = f"{ordinary.words()}, an ordinary step"
        if not longer or longer[0].difference_s <= 0:
            return (
                f"Its recorded phases (data loading, forward, backward, optimizer) took no "
                f"longer than in {against}: the time went between them"
            )
        first = longer[0]
        text = (
            f"It spent {first.difference_s:.3f} s more in {first.phase} than {against} "
            f"({first.outlier_s:.3f} s against {first.ordinary_s or 0.0:.3f} s)"
        )
        if len(longer) > 1:
            text += f", and {longer[1].difference_s:.3f} s more in {longer[1].phase}"
        return text

    def _explains_the_slow_step(self, operator: OperatorTime) -> bool:
        """Whether ``operator`` accounts for a tenth or more of the slow step's excess time (the
        steps after a one-off stall are ordinary: their operators differ by noise only)."""
        excess = self._excess_s()
        if excess is None:
            return operator.difference_ms > 0
        return operator.difference_ms / 1000.0 >= EXPLAINS * excess


def compare_captures(profiler_output: str) -> list[CaptureComparison]:
    """Every capture under ``profiler_output`` with its comparison, oldest first."""
    timeline = TraceFileReader(profiler_output)
    found = []
    for capture in list_captures(profiler_output):
        comparison = CaptureComparison(capture)
        for name in (capture.trace, capture.comparison_trace):
            path = capture.trace_path(profiler_output, name)
            if path is not None:
                comparison.traces.append(path)
        if capture.slow_step is not None:
            # A manifest written before the recorder kept an unprofiled ordinary step has the
            # profiled comparison step only.
            comparison.ordinary = capture.ordinary or capture.comparison
            comparison.phases = _phases(
                timeline, capture.node, capture.slow_step, comparison.ordinary
            )
        comparison.operators = _operators(profiler_output, capture)
        found.append(comparison)
    return found


def _phase_seconds(timeline: TraceFileReader, node: str, step: CapturedStep) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    event: TraceEvent
    for event in timeline.events(step.start_us, step.end_us, node_id=node):
        if is_credited(event):
            inside = min(event.end_us, step.end_us) - max(event.start_us, step.start_us)
            if inside > 0:
                totals[event.phase] += inside / 1e6
    return totals


def _phases(
    timeline: TraceFileReader, node: str, slow: CapturedStep, ordinary: CapturedStep | None
) -> list[PhaseDifference]:
    outlier = _phase_seconds(timeline, node, slow)
    usual = _phase_seconds(timeline, node, ordinary) if ordinary is not None else None
    names = set(outlier) | set(usual or ())
    phases = [
        PhaseDifference(
            name, outlier.get(name, 0.0), None if usual is None else usual.get(name, 0.0)
        )
        for name in names
    ]
    return sorted(phases, key=lambda phase: -phase.difference_s)


def _operator_ms(path: str | None, node: str, steps: int) -> dict[str, float]:
    if path is None or steps <= 0:
        return {}
    totals: dict[str, float] = defaultdict(float)
    for event in read_trace_events(DetailedTrace(path, "pytorch", node, 0, 0.0)):
        duration = event.get("dur")
        if event.get("cat") in OPERATOR_CATEGORIES and isinstance(duration, (int, float)):
            totals[str(event.get("name"))] += duration / 1000.0 / steps
    return totals


def _operators(profiler_output: str, capture: Capture) -> list[OperatorTime]:
    captured = _operator_ms(
        capture.trace_path(profiler_output, capture.trace), capture.node, len(capture.steps)
    )
    ordinary = None
    if capture.comparison is not None:
        path = capture.trace_path(profiler_output, capture.comparison_trace)
        ordinary = _operator_ms(path, capture.node, 1) if path is not None else None
    names = set(captured) | set(ordinary or ())
    operators = [
        OperatorTime(
            name, captured.get(name, 0.0), None if ordinary is None else ordinary.get(name, 0.0)
        )
        for name in names
    ]
    operators.sort(key=lambda operator: -operator.difference_ms)
    return operators[:TOP_OPERATORS]
