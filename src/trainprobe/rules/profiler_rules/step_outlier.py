"""StepOutlier: steps much slower than the others.

It reads the step events of the framework timeline (``Step:ModeKeys.<MODE>``), so it needs
framework profiling. Without it (``Window.framework_expected`` false) it does not judge.

StepOutlier (reference/smdebug.md §5.3) keeps the durations of the steps per host and per kind
of step (``Step:ModeKeys.TRAIN``, ``...EVAL``; only the given ``mode``'s when set). Once a kind
has more than 100 steps, the steps longer than the mean plus ``stddev`` standard deviations are
outliers; the rule fires in each window where more than ``n_outliers`` steps of one kind are. The
framework events inside the outlier steps are added up, to show what those steps did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainprobe.analysis.profiling_data.steps import is_step_event
from trainprobe.rules.profiler_rules.framework_summary import (
    FrameworkTotals,
    step_number,
)
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.statistics import MAX_DATAPOINTS, histogram, percentile
from trainprobe.rules.profiler_rules.window import NO_FRAMEWORK_EVENTS, Window
from trainprobe.storage.modes import STEP_PHASE_PREFIX
from trainprobe.storage.trace_file import TraceEvent

__all__ = ["LEAST_STEPS", "StepOutlier"]

LEAST_STEPS = 100
_LISTED_OUTLIERS = 50


@dataclass
class _Steps:
    """The durations (seconds) and numbers of one host's steps of one kind."""

    durations: list[float] = field(default_factory=list)
    numbers: list[int | None] = field(default_factory=list)
    threshold: float | None = None
    outliers: int = 0

    def add(self, duration: float, number: int | None) -> None:
        self.durations.append(duration)
        self.numbers.append(number)
        if len(self.durations) > MAX_DATAPOINTS:
            half = len(self.durations) // 2
            del self.durations[:half]
            del self.numbers[:half]


class StepOutlier(WindowRule):
    """Fires when too many steps take much longer than the others."""

    rule_name = "StepOutlier"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.kinds: dict[tuple[str, str], _Steps] = {}
        self.in_outliers = FrameworkTotals()
        self.framework_expected = True

    def _wanted(self, event: TraceEvent) -> bool:
        mode = self.parameters.get("mode")
        if mode is None:
            return is_step_event(event)
        return event.phase == f"{STEP_PHASE_PREFIX}{mode}"

    def evaluate_window(self, window: Window) -> bool:
        self.framework_expected = window.framework_expected
        fresh: dict[tuple[str, str], list[TraceEvent]] = {}
        for event in window.framework:
            if self._wanted(event):
                key = (event.node_id, event.phase)
                self.kinds.setdefault(key, _Steps()).add(
                    event.duration_us / 1e6, step_number(event)
                )
                fresh.setdefault(key, []).append(event)
        fired = False
        outliers_now = 0
        for key, steps in sorted(self.kinds.items()):
            if len(steps.durations) <= LEAST_STEPS:
                continue
            durations = np.asarray(steps.durations)
            steps.threshold = float(durations.mean() + self.number("stddev") * durations.std())
            steps.outliers = int((durations > steps.threshold).sum())
            outliers_now += steps.outliers
            slow = [e for e in fresh.get(key, []) if e.duration_us / 1e6 > steps.threshold]
            self.in_outliers.add(_inside(window.framework, slow))
            if steps.outliers > self.count("n_outliers"):
                fired = True
                self.record(
                    f"{steps.outliers} {_mode_of(key[1])} steps on {key[0]} took longer than "
                    f"{steps.threshold:.3f} s",
                    steps.outliers,
                    self.count("n_outliers"),
                )
        self.report.violations = outliers_now
        self.report.datapoints = sum(len(steps.durations) for steps in self.kinds.values())
        self.report.details = self._details()
        return fired

    def _details(self) -> dict[str, Any]:
        kinds = {}
        for (node, phase), steps in sorted(self.kinds.items()):
            durations = steps.durations
            stats = {
                "count": len(durations),
                "mean": float(np.mean(durations)),
                "max": max(durations),
                "p99": percentile(durations, 99),
                "p95": percentile(durations, 95),
                "p50": percentile(durations, 50),
                "min": min(durations),
            }
            listed = []
            if steps.threshold is not None:
                listed = [
                    {"step": number, "duration_s": duration}
                    for duration, number in zip(durations, steps.numbers, strict=True)
                    if duration > steps.threshold
                ][-_LISTED_OUTLIERS:]
            kinds[f"{node}/{phase}"] = {
                "node": node,
                "phase": phase,
                "step_stats_s": stats,
                "threshold_s": steps.threshold,
                "outliers": steps.outliers,
                "outlier_steps": listed,
                "histogram_s": histogram(durations, 100),
            }
        return {"unit": "seconds", "steps": kinds, "in_outlier_steps": self.in_outliers.to_json()}

    def recommendation(self) -> str:
        if not self.kinds:
            return NO_FRAMEWORK_EVENTS if not self.framework_expected else "No steps recorded yet."
        judged = [(key, steps) for key, steps in self.kinds.items() if steps.threshold is not None]
        if not judged:
            most = max(len(steps.durations) for steps in self.kinds.values())
            return f"{most} steps so far; the rule judges step durations after {LEAST_STEPS}."
        (node, phase), steps = max(judged, key=lambda item: item[1].outliers)
        assert steps.threshold is not None
        mean = float(np.mean(steps.durations))
        if steps.outliers > self.count("n_outliers"):
            return (
                f"{steps.outliers} {_mode_of(phase)} steps on {node} took longer than "
                f"{steps.threshold:.3f} s (the mean, {mean:.3f} s, plus "
                f"{self.number('stddev'):g} standard deviations), more than the "
                f"{self.count('n_outliers')} tolerated. Look at what these steps do differently: "
                "checkpointing or evaluation every few steps, data loader stalls, garbage "
                "collection, or other processes competing for the host."
            )
        return (
            f"Step durations were steady: {steps.outliers} outlier(s) among "
            f"{len(steps.durations)} {_mode_of(phase)} steps on {node} (mean {mean:.3f} s)."
        )


def _mode_of(phase: str) -> str:
    """The mode a step event's phase names, for a sentence: ``TRAIN`` for
    ``Step:ModeKeys.TRAIN``."""
    return phase.removeprefix(STEP_PHASE_PREFIX)


def _inside(events: Sequence[TraceEvent], steps: list[TraceEvent]) -> list[TraceEvent]:
    """The events of the same node that start inside one of ``steps``."""
    found = []
    for event in events:
        if is_step_event(event):
            continue
        for step in steps:
            if event.node_id == step.node_id and step.start_us <= event.start_us < step.end_us:
                found.append(event)
                break
    return found
