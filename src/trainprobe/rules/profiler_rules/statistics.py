"""The numbers the profiler rules report: percentiles, box plots, histograms, distances.

``ValueSeries`` holds one metric's values across windows, bounded: past ``MAX_DATAPOINTS`` values
it keeps the newest ones (smdebug's rules reset their state at a million entries; keeping the newest
half instead leaves the rules' recent windows intact). Every function returns plain floats and
lists, ready for the rules' JSON reports.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = [
    "MAX_DATAPOINTS",
    "ValueSeries",
    "box",
    "histogram",
    "js_distance",
    "percentile",
    "summary",
]

MAX_DATAPOINTS = 1_000_000


class ValueSeries:
    """One metric's values in arrival order, the newest ``limit`` at most."""

    def __init__(self, limit: int = MAX_DATAPOINTS) -> None:
        self.limit = limit
        self._values: list[float] = []
        self.dropped = 0

    def append(self, value: float) -> None:
        """Add one value; past the limit the oldest half is dropped."""
        self._values.append(float(value))
        if len(self._values) > self.limit:
            half = len(self._values) // 2
            del self._values[:half]
            self.dropped += half

    def extend(self, values: Iterable[float]) -> None:
        """Add several values."""
        for value in values:
            self.append(value)

    def last(self, count: int) -> np.ndarray:
        """The newest ``count`` values."""
        return np.asarray(self._values[-count:] if count > 0 else [], dtype=float)

    def values(self) -> np.ndarray:
        """Every value held."""
        return np.asarray(self._values, dtype=float)

    def __len__(self) -> int:
        return len(self._values)


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The ``q``-th percentile (linear interpolation); nan for no values."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return math.nan
    return float(np.percentile(array, q))


def summary(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Count, mean, min, p5, p25, p50, p75, p95, p99 and max of ``values`` (empty: count 0)."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return {"count": 0}
    p5, p25, p50, p75, p95, p99 = np.percentile(array, [5, 25, 50, 75, 95, 99])
    return {
        "count": int(array.size),
        "mean": float(array.mean()),
        "min": float(array.min()),
        "p5": float(p5),
        "p25": float(p25),
        "p50": float(p50),
        "p75": float(p75),
        "p95": float(p95),
        "p99": float(p99),
        "max": float(array.max()),
    }


def box(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """A box plot of ``values``: quartiles, p95, extremes and the 1.5 IQR whiskers."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return {}
    p25, p50, p75, p95 = np.percentile(array, [25, 50, 75, 95])
    spread = p75 - p25
    upper = array[array <= p75 + 1.5 * spread]
    lower = array[array >= p25 - 1.5 * spread]
    return {
        "min": float(array.min()),
        "lower_whisker": float(lower.min()),
        "p25": float(p25),
        "p50": float(p50),
        "p75": float(p75),
        "p95": float(p95),
        "upper_whisker": float(upper.max()),
        "max": float(array.max()),
    }


def histogram(
    values: Sequence[float] | np.ndarray,
    bins: int = 100,
    value_range: tuple[float, float] | None = None,
) -> dict[str, list[float]]:
    """Counts of ``values`` in ``bins`` equal bins (over ``value_range``, default min to max)."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return {"bin_edges": [], "counts": []}
    counts, edges = np.histogram(array, bins=bins, range=value_range)
    return {"bin_edges": [float(edge) for edge in edges], "counts": [int(c) for c in counts]}


def _kullback_leibler(p: np.ndarray, q: np.ndarray) -> float:
    present = p > 0
    return float(np.sum(p[present] * np.log(p[present] / q[present])))


def js_distance(first: Sequence[float] | np.ndarray, second: Sequence[float] | np.ndarray) -> float:
    """The Jensen-Shannon distance (natural log, so at most sqrt(ln 2), about 0.83) between two
    histograms of counts over the same bins; nan when either is empty."""
    p = np.asarray(first, dtype=float)
    q = np.asarray(second, dtype=float)
    if p.sum() <= 0 or q.sum() <= 0:
        return math.nan
    p, q = p / p.sum(), q / q.sum()
    middle = (p + q) / 2
    divergence = (_kullback_leibler(p, middle) + _kullback_leibler(q, middle)) / 2
    return math.sqrt(max(divergence, 0.0))
