"""The report's step durations: each training process's steps over time, their histogram, and
the outliers.

A step is an outlier when it took longer than its mode's mean plus ``stddev`` standard
deviations, StepOutlier's test (its ``stddev`` parameter, when the rule ran). Statistics and the
histogram use every step; the plot of durations by step is downsampled, and the outliers are
listed exactly (the longest ones first when there are many).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trainprobe.analysis.profiling_data.steps import StepSpan
from trainprobe.report.series import envelope, rounded, summary

__all__ = ["step_durations"]

HISTOGRAM_BINS = 100
LISTED_OUTLIERS = 500


def step_durations(spans: Sequence[StepSpan], stddev: float) -> dict[str, Any]:
    """The section's content: one entry per training process and mode, in milliseconds."""
    groups: dict[tuple[str, str], list[StepSpan]] = {}
    for span in spans:
        groups.setdefault((span.node_id, span.mode), []).append(span)
    return {
        "Stddev": stddev,
        "Processes": [
            _process(node_id, mode, found, stddev)
            for (node_id, mode), found in sorted(groups.items())
        ],
    }


def _process(node_id: str, mode: str, spans: list[StepSpan], stddev: float) -> dict[str, Any]:
    spans = sorted(spans, key=lambda span: span.step)
    steps = np.array([span.step for span in spans], dtype=np.float64)
    durations = np.array([span.duration_us for span in spans]) / 1000.0
    waits = np.array([span.wait_us for span in spans]) / 1000.0
    threshold = float(durations.mean() + stddev * durations.std()) if durations.size > 1 else None
    outliers = np.flatnonzero(durations > threshold) if threshold is not None else np.array([], int)
    listed = outliers[np.argsort(-durations[outliers], kind="stable")][:LISTED_OUTLIERS]
    listed.sort()
    counts, edges = np.histogram(durations, bins=HISTOGRAM_BINS)
    return {
        "Node": node_id,
        "Mode": mode,
        "Steps": int(steps.size),
        "FirstStep": int(steps[0]),
        "LastStep": int(steps[-1]),
        "DurationMs": summary(durations),
        "DataWaitMs": summary(waits),
        "OutlierThresholdMs": threshold,
        "Outliers": int(outliers.size),
        "OutlierSteps": [int(step) for step in steps[listed]],
        "OutlierDurationsMs": rounded(durations[listed]),
        "Plot": envelope(steps, durations),
        "Histogram": {"Edges": rounded(edges), "Counts": [int(count) for count in counts]},
    }
