"""What the flight recorder's captures show: the slow step against an ordinary one.

For each capture (``trainprobe.storage.flight_captures``):

- **phases**: the time of each phase of the step timeline (forward, backward, optimizer, data
  loading, ...) inside the slow step that triggered it, against the ordinary comparison step,
  largest difference first. The timeline records every step, so the slow step itself is measured,
  although the profiler only started after it;
- **operators**: per step, the time of each operator of the torch.profiler traces (CPU operators
  and, with a GPU, kernels; an operator's time includes the operators it calls) in the captured
  steps against the comparison step, largest difference first. A capture without a comparison
  (a request, a rule) lists its steps' operators, slowest first. The headline names the top
  operator only where it accounts for a tenth of the slow step's excess time or more: the steps
  after a one-off stall are ordinary ones.

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


@dataclass
class CaptureComparison:
    """One capture, its files, and what its steps did differently."""

    capture: Capture
    traces: list[str] = field(default_factory=list)
    phases: list[PhaseDifference] = field(default_factory=list)
    operators: list[OperatorTime] = field(default_factory=list)

    @property
    def headline(self) -> str:
        """The capture in one sentence: its trigger and what differed most."""
        capture = self.capture
        text = (
            f"{capture.trigger} at step {capture.trigger_step} on {capture.node}: {capture.reason}"
        )
        if self.phases and self.phases[0].ordinary_s is not None:
            phase = self.phases[0]
            text += (
                f". The slow step spent {phase.difference_s:.3f} s more in {phase.phase} than "
                "an ordinary step"
            )
        if self.operators and self._explains_the_slow_step(self.operators[0]):
            text += f"; the operator that differs most is {self.operators[0].name}"
        return text

    def _explains_the_slow_step(self, operator: OperatorTime) -> bool:
        """Whether ``operator`` accounts for a tenth or more of the slow step's excess time (the
        steps after a one-off stall are ordinary: their operators differ by noise only)."""
        capture = self.capture
        if capture.slow_step is None or capture.median_s is None:
            return True
        excess_s = capture.slow_step.duration_s - capture.median_s
        return operator.difference_ms / 1000.0 >= 0.1 * excess_s


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
            comparison.phases = _phases(
                timeline, capture.node, capture.slow_step, capture.comparison
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
