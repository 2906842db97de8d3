"""``MetricsHistogram``: how often each system metric had each value (2 % bins from 0 to 100),
one histogram per selected dimension and event, as smdebug's notebook chart of that name."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from plotly import graph_objects as go
from plotly.subplots import make_subplots

from trainprobe.report.notebook_charts.chart import Chart, group_readings, matching

__all__ = ["MetricsHistogram"]

_COLUMNS = 4
_BINS = np.arange(0, 100, 2)


class MetricsHistogram(Chart):
    """``MetricsHistogram(system_metrics_reader).plot(starttime, endtime, select_dimensions,
    select_events)``: times in microseconds since the epoch; dimensions are regexes searched
    in ``CPUUtilization-nodeid:algo-1``, events regexes found anywhere in ``cpu0``, ``total``."""

    def __init__(self, metrics_reader: Any) -> None:
        self.metrics_reader = metrics_reader
        self.system_metrics: dict[str, dict[str, list[float]]] = {}
        self.select_dimensions: list[str] = []
        self.select_events: list[str] = []
        self.filtered_dimensions: list[str] = []
        self.filtered_events: list[str] = []
        self.last_timestamp = 0

    def plot(
        self,
        starttime: float = 0,
        endtime: float | None = None,
        select_dimensions: list[str] | None = None,
        select_events: list[str] | None = None,
        show_workers: bool = True,
    ) -> Any:
        """Read the readings of the time range and draw the histograms; return the figure."""
        if endtime is None:
            endtime = self.metrics_reader.get_timestamp_of_latest_available_file()
        self.last_timestamp = int(endtime)
        self.select_dimensions = [".*"] if select_dimensions is None else select_dimensions
        self.select_events = [".*"] if select_events is None else select_events
        self.show_workers = show_workers
        grouped = group_readings(self.metrics_reader.get_events(starttime, endtime), show_workers)
        self.system_metrics = {
            dimension: {name: [value for _, value in points] for name, points in events.items()}
            for dimension, events in grouped.series.items()
        }
        self.filtered_dimensions = matching(
            grouped.dimensions, self.select_dimensions, anywhere=False
        )
        self.filtered_events = matching(grouped.events, self.select_events, anywhere=True)
        self.figure = self._draw()
        self._display()
        return self.figure

    def _draw(self) -> Any:
        panels = [
            (dimension, event)
            for dimension in self.filtered_dimensions
            for event in self.filtered_events
            if event in self.system_metrics[dimension]
        ]
        rows = max(1, math.ceil(len(panels) / _COLUMNS))
        figure = make_subplots(
            rows=rows,
            cols=_COLUMNS,
            subplot_titles=[f"{dimension}_{event}" for dimension, event in panels],
        )
        for number, (dimension, event) in enumerate(panels):
            counts, edges = np.histogram(self.system_metrics[dimension][event], bins=_BINS)
            figure.add_trace(
                go.Bar(
                    x=(edges[:-1] + edges[1:]) / 2,
                    y=counts,
                    width=edges[1:] - edges[:-1],
                    name=f"{dimension}_{event}",
                    marker_color="navy",
                    opacity=0.5,
                    showlegend=False,
                ),
                row=number // _COLUMNS + 1,
                col=number % _COLUMNS + 1,
            )
        figure.update_yaxes(title_text="Occurrences", col=1)
        figure.update_layout(height=250 * rows, title="System metrics histograms")
        return figure
