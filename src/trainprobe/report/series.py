"""Long series made small enough to plot, and the exact figures that summarise them.

A report of an 8-hour job at 500 ms has 57 600 readings per metric and maybe 100 000 steps; a
browser draws a few thousand points per plot without effort. ``envelope`` cuts a series into
equal buckets along x and keeps each bucket's mean, minimum and maximum, so a spike shows at its
full height however far the plot is zoomed out. ``summary`` gives the count, mean, extremes and
percentiles of the full series, computed before anything is dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["PERCENTILES", "envelope", "rounded", "summary"]

PERCENTILES = (5, 25, 50, 75, 95, 99)
BUCKETS = 1000
"""Points per plotted series, at most."""

Floats = npt.NDArray[np.float64]


def rounded(values: Floats | list[float], digits: int = 4) -> list[float | None]:
    """``values`` to ``digits`` significant digits, as a JSON list (None for NaN)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return []
    magnitude = np.floor(np.log10(np.abs(np.where(array == 0, 1.0, array))))
    scale = np.where(np.isfinite(magnitude), 10.0 ** (digits - 1 - magnitude), 1.0)
    out = np.round(array * scale) / scale
    listed: list[float | None] = out.tolist()
    for index in np.flatnonzero(~np.isfinite(out)).tolist():
        listed[index] = None
    return listed


def summary(values: Floats) -> dict[str, Any]:
    """Count, mean, min, the percentiles and max of ``values`` (all of them)."""
    if values.size == 0:
        return {"count": 0}
    points = np.percentile(values, PERCENTILES)
    return {
        "count": int(values.size),
        "mean": float(values.mean()),
        "min": float(values.min()),
        **{f"p{percent}": float(point) for percent, point in zip(PERCENTILES, points, strict=True)},
        "max": float(values.max()),
    }


def envelope(x: Floats, y: Floats, buckets: int = BUCKETS) -> dict[str, list[float | None]]:
    """``x``/``y`` as at most ``buckets`` points: each bucket's first x, mean, min and max y.

    ``x`` must be sorted. A series short enough is kept whole (min and max equal the mean).
    """
    if x.size <= buckets:
        values = rounded(y)
        return {"x": rounded(x, 7), "mean": values, "min": values, "max": values}
    edges = np.linspace(x[0], x[-1], buckets + 1)
    # Each bucket's first point (the last bucket holds the last edge too); an empty bucket's
    # is the next one's, and repeats drop out.
    starts = np.unique(np.searchsorted(x, edges[:buckets], side="left"))
    starts = starts[starts < x.size]
    counts = np.diff(np.r_[starts, x.size])
    return {
        "x": rounded(x[starts], 7),
        "mean": rounded(np.add.reduceat(y, starts) / counts),
        "min": rounded(np.minimum.reduceat(y, starts)),
        "max": rounded(np.maximum.reduceat(y, starts)),
    }
