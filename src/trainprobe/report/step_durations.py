"""The report's step durations: each training process's steps over time, their histogram, and
the outliers.

A step is an outlier when it took longer than its mode's mean plus ``stddev`` standard
deviations, StepOutlier's test (its ``stddev`` parameter, when the rule ran). Statistics and the
histogram use every step; the plot of durations by step is downsampled, and the outliers are
listed exactly (the longest ones first when there are many).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trainprobe.analysis.profiling_data.steps import StepSpan
from trainprobe.report.records import Envelope, Record, Summary
from trainprobe.report.series import envelope, rounded, summary

__all__ = ["DurationHistogram", "ProcessSteps", "StepDurations", "step_durations"]

HISTOGRAM_BINS = 100
LISTED_OUTLIERS = 500


@dataclass(frozen=True)
class DurationHistogram(Record):
    """How many steps took each range of milliseconds: ``counts[i]`` between ``edges[i]`` and
    ``edges[i + 1]``."""

    edges: list[float | None]
    counts: list[int]


@dataclass(frozen=True)
class ProcessSteps(Record):
    """One training process's steps of one mode, in milliseconds."""

    node: str
    mode: str
    steps: int
    first_step: int
    last_step: int
    duration_ms: Summary
    data_wait_ms: Summary
    outlier_threshold_ms: float | None
    outliers: int
    outlier_steps: list[int]
    outlier_durations_ms: list[float | None]
    plot: Envelope
    histogram: DurationHistogram


@dataclass(frozen=True)
class StepDurations(Record):
    """The section: the outliers' ``stddev`` (see the module docstring), and each process's
    steps."""

    stddev: float
    processes: list[ProcessSteps]


def step_durations(spans: Sequence[StepSpan], stddev: float) -> StepDurations:
    """The section's content: one entry per training process and mode, in milliseconds."""
    groups: dict[tuple[str, str], list[StepSpan]] = {}
    for span in spans:
        groups.setdefault((span.node_id, span.mode), []).append(span)
    return StepDurations(
        stddev,
        [
            _process(node_id, mode, found, stddev)
            for (node_id, mode), found in sorted(groups.items())
        ],
    )


def _process(node_id: str, mode: str, spans: list[StepSpan], stddev: float) -> ProcessSteps:
    spans = sorted(spans, key=lambda span: span.step)
    steps = np.array([span.step for span in spans], dtype=np.float64)
    durations = np.array([span.duration_us for span in spans]) / 1000.0
    waits = np.array([span.wait_us for span in spans]) / 1000.0
    threshold = float(durations.mean() + stddev * durations.std()) if durations.size > 1 else None
    outliers = np.flatnonzero(durations > threshold) if threshold is not None else np.array([], int)
    listed = outliers[np.argsort(-durations[outliers], kind="stable")][:LISTED_OUTLIERS]
    listed.sort()
    counts, edges = np.histogram(durations, bins=HISTOGRAM_BINS)
    return ProcessSteps(
        node=node_id,
        mode=mode,
        steps=int(steps.size),
        first_step=int(steps[0]),
        last_step=int(steps[-1]),
        duration_ms=summary(durations),
        data_wait_ms=summary(waits),
        outlier_threshold_ms=threshold,
        outliers=int(outliers.size),
        outlier_steps=[int(step) for step in steps[listed]],
        outlier_durations_ms=rounded(durations[listed]),
        plot=envelope(steps, durations),
        histogram=DurationHistogram(rounded(edges), [int(count) for count in counts]),
    )
