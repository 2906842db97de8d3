"""``StepHistogram``: how long steps and their phases took (seconds), one histogram per selected
phase (per training process with ``show_workers``), as smdebug's notebook chart of that name."""

from __future__ import annotations

import math
from typing import Any

from plotly import graph_objects as go
from plotly.subplots import make_subplots

from trainprobe.report.notebook_charts.chart import Chart, matching

__all__ = ["StepHistogram"]

_COLUMNS = 2
_DEFAULT_METRICS = ["Step:ModeKeys", "Forward-node", r"Backward\(post-forward\)-node"]


class StepHistogram(Chart):
    """``StepHistogram(framework_metrics_reader).plot(starttime, endtime, select_metrics,
    show_workers)``: times in microseconds since the epoch; metrics are regexes searched in
    ``<phase>-nodeid:<training process>`` (``<phase>`` without ``show_workers``)."""

    def __init__(self, metrics_reader: Any, width: int = 500) -> None:
        self.metrics_reader = metrics_reader
        self.last_timestamp = int(metrics_reader.get_timestamp_of_latest_available_file())
        self.step_metrics: dict[str, list[float]] = {}
        self.width = width

    def plot(
        self,
        starttime: float = 0,
        endtime: float | None = None,
        select_metrics: list[str] | None = None,
        show_workers: bool = True,
    ) -> Any:
        """Read the events of the time range and draw the histograms; return the figure."""
        if endtime is None:
            endtime = self.metrics_reader.get_timestamp_of_latest_available_file()
        self.last_timestamp = int(endtime)
        self.select_metrics = _DEFAULT_METRICS if select_metrics is None else select_metrics
        self.show_workers = show_workers
        durations: dict[str, list[float]] = {}
        for event in self.metrics_reader.get_events(starttime, endtime):
            key = event.event_phase
            if show_workers:
                key = f"{key}-nodeid:{event.node_id}"
            durations.setdefault(key, []).append(event.duration / 1e6)
        chosen = matching(list(durations), self.select_metrics, anywhere=False)
        self.step_metrics = {key: durations[key] for key in chosen}
        self.figure = self._draw()
        self._display()
        return self.figure

    def clear(self) -> None:
        """Forget the durations read."""
        self.step_metrics = {}

    def _draw(self) -> Any:
        names = list(self.step_metrics)
        rows = max(1, math.ceil(len(names) / _COLUMNS))
        figure = make_subplots(rows=rows, cols=_COLUMNS, subplot_titles=names)
        for number, name in enumerate(names):
            figure.add_trace(
                go.Histogram(x=self.step_metrics[name], name=name, nbinsx=50, showlegend=False),
                row=number // _COLUMNS + 1,
                col=number % _COLUMNS + 1,
            )
        figure.update_xaxes(title_text="Duration in seconds")
        figure.update_yaxes(title_text="Occurrences", col=1)
        figure.update_layout(height=300 * rows, title="Step durations")
        return figure
