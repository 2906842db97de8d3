"""What the notebook charts share: the figure's display and HTML, and the system readings grouped
by dimension and event (with each dimension's ``total``) and chosen by smdebug's regexes."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Chart", "SystemSeries", "group_readings", "matching"]


class Chart:
    """A plotly figure (``figure``) that Jupyter shows and ``save_html`` writes."""

    figure: Any = None

    def save_html(self, path: str | os.PathLike[str]) -> str:
        """Write the chart as a page holding plotly.js (it opens offline); return its path."""
        if self.figure is None:
            raise ValueError(f"{type(self).__name__} has no figure yet: call plot() first")
        self.figure.write_html(os.fspath(path), include_plotlyjs=True, full_html=True)
        return os.fspath(path)

    def show(self) -> None:
        """Show the chart in the notebook (a browser tab outside one)."""
        if self.figure is not None:
            self.figure.show()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        return None if self.figure is None else self.figure._repr_mimebundle_(include, exclude)

    def _display(self, figure: Any = None) -> None:
        """Show the figure (or ``figure``) where smdebug's chart showed itself: in a running
        notebook only."""
        try:
            from IPython import get_ipython  # type: ignore[import-not-found]
            from IPython.display import display  # type: ignore[import-not-found]
        except ImportError:
            return
        if get_ipython() is not None:
            display(self.figure if figure is None else figure)


@dataclass
class SystemSeries:
    """Readings by dimension (``CPUUtilization``, or ``CPUUtilization-nodeid:algo-1`` per
    node) and event name (``cpu0``... and ``total``, the mean of a dimension's events), each
    a list of (timestamp in seconds, value)."""

    series: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)

    @property
    def dimensions(self) -> list[str]:
        """The dimensions, in the order first read."""
        return list(self.series)

    @property
    def events(self) -> list[str]:
        """Every event name of any dimension, ``total`` included."""
        names = {name for events in self.series.values() for name in events}
        return sorted(names)


def group_readings(readings: Iterable[Any], show_workers: bool) -> SystemSeries:
    """The readings (smdebug's ``ProfilerSystemEvent`` attributes) grouped into series; each
    dimension's ``total`` sums its events' n-th readings and divides by their count."""
    grouped = SystemSeries()
    for reading in readings:
        dimension = reading.dimension
        if show_workers:
            dimension = f"{dimension}-nodeid:{reading.node_id}"
        events = grouped.series.setdefault(dimension, {})
        events.setdefault(reading.name, []).append((reading.timestamp, reading.value))
    for events in grouped.series.values():
        columns = list(events.values())
        events["total"] = [
            (points[0][0], sum(value for _, value in points) / len(columns))
            for points in zip(*columns, strict=False)
        ]
    return grouped


def matching(available: Sequence[str], patterns: Sequence[str], *, anywhere: bool) -> list[str]:
    """The names that one of smdebug's regex ``patterns`` finds (``anywhere``: ``.*p.*``), in
    the order of ``available``."""
    found: set[str] = set()
    for pattern in patterns:
        expression = re.compile(f".*{pattern}.*" if anywhere else pattern)
        found.update(name for name in available if expression.search(name))
    return [name for name in available if name in found]
