"""``TimelineCharts``: the selected system metrics over time, one panel per dimension, above the
training's framework events by phase, as smdebug's notebook chart of that name.

``plot_detailed_profiler_data([first, last])`` draws the framework events between two readings
(positions in a dimension's series, as the chart's x axis numbers them in smdebug).
"""

from __future__ import annotations

from typing import Any

from plotly import graph_objects as go
from plotly.subplots import make_subplots

from trainprobe.config.errors import ConfigError
from trainprobe.report.notebook_charts.chart import Chart, SystemSeries, group_readings, matching

__all__ = ["TimelineCharts"]


def _events_figure(events: list[Any], origin_s: float, title: str) -> Any:
    """The framework events as horizontal bars by phase (seconds since ``origin_s``)."""
    figure = go.Figure()
    _add_events(figure, events, origin_s, row=None)
    figure.update_layout(title=title, xaxis_title="Time in seconds", barmode="overlay")
    return figure


def _add_events(figure: Any, events: list[Any], origin_s: float, row: int | None) -> None:
    phases: dict[str, list[Any]] = {}
    for event in events:
        phases.setdefault(event.event_phase, []).append(event)
    for phase, found in phases.items():
        trace = go.Bar(
            orientation="h",
            base=[event.start_time / 1e6 - origin_s for event in found],
            x=[event.duration / 1e6 for event in found],
            y=[phase] * len(found),
            text=[event.event_name for event in found],
            name=phase,
            hovertemplate="%{text}: %{x:.4f} s<extra>%{y}</extra>",
        )
        if row is None:
            figure.add_trace(trace)
        else:
            figure.add_trace(trace, row=row, col=1)


class TimelineCharts(Chart):
    """``TimelineCharts(system_metrics_reader, framework_metrics_reader, starttime, endtime,
    select_dimensions, select_events, x)``: drawn (and shown) at once, the last ``x`` readings
    in view; times in microseconds since the epoch; ``framework_metrics_reader`` may be None
    (system metrics only)."""

    def __init__(
        self,
        system_metrics_reader: Any,
        framework_metrics_reader: Any,
        starttime: float = 0,
        endtime: float | None = None,
        select_dimensions: list[str] | None = None,
        select_events: list[str] | None = None,
        x: int = 1000,
        show_workers: bool = True,
    ) -> None:
        self.system_metrics_reader = system_metrics_reader
        self.framework_metrics_reader = framework_metrics_reader
        if endtime is None:
            endtime = system_metrics_reader.get_timestamp_of_latest_available_file() + 1
        self.starttime = starttime
        self.last_timestamp_system_metrics = int(endtime)
        self.select_dimensions = [".*"] if select_dimensions is None else select_dimensions
        self.select_events = [".*"] if select_events is None else select_events
        self.width = x
        self.show_workers = show_workers
        readings = system_metrics_reader.get_events(starttime, endtime)
        self.series: SystemSeries = group_readings(readings, show_workers)
        self.filtered_dimensions = matching(
            self.series.dimensions, self.select_dimensions, anywhere=False
        )
        self.filtered_events = matching(self.series.events, self.select_events, anywhere=True)
        self.origin_s = min((reading.timestamp for reading in readings), default=0.0)
        self.framework_events = (
            framework_metrics_reader.get_events(starttime, endtime)
            if framework_metrics_reader is not None
            else []
        )
        self.detailed_figure: Any = None
        self.figure = self._draw()
        self._display()

    def _draw(self) -> Any:
        panels = list(self.filtered_dimensions)
        rows = len(panels) + (1 if self.framework_metrics_reader is not None else 0)
        titles = [*panels, "Framework events"][: max(rows, 1)]
        figure = make_subplots(rows=max(rows, 1), cols=1, shared_xaxes=True, subplot_titles=titles)
        for row, dimension in enumerate(panels, start=1):
            for event in self.filtered_events:
                points = self.series.series[dimension].get(event)
                if points:
                    figure.add_trace(
                        go.Scatter(
                            x=[time - self.origin_s for time, _ in points],
                            y=[value for _, value in points],
                            mode="lines",
                            name=f"{dimension} {event}",
                        ),
                        row=row,
                        col=1,
                    )
        if self.framework_metrics_reader is not None:
            _add_events(figure, self.framework_events, self.origin_s, row=rows)
        figure.update_xaxes(title_text="Time in seconds", row=max(rows, 1), col=1)
        times = sorted(
            {time for events in self.series.series.values() for time, _ in events.get("total", [])}
        )
        if len(times) > self.width:  # the last x readings in view, as smdebug's
            figure.update_xaxes(
                range=[times[-self.width] - self.origin_s, times[-1] - self.origin_s]
            )
        figure.update_layout(height=200 * max(rows, 1) + 100, barmode="overlay")
        return figure

    def plot_detailed_profiler_data(self, indexes: list[int]) -> Any:
        """Draw (and show) the framework events between the ``min(indexes)``-th and the
        ``max(indexes)``-th reading of the first selected dimension (a position past the last
        reading is the last); return the figure."""
        if self.framework_metrics_reader is None or not self.filtered_dimensions:
            raise ConfigError(
                "framework_metrics_reader",
                self.framework_metrics_reader,
                "a framework metrics reader and a selected dimension, for the detailed data",
            )
        total = self.series.series[self.filtered_dimensions[0]]["total"]
        if not indexes or min(indexes) < 0 or not total:
            raise ConfigError("indexes", indexes, f"reading positions from 0 to {len(total) - 1}")
        first, last = (min(position, len(total) - 1) for position in (min(indexes), max(indexes)))
        begin_s, end_s = total[first][0], total[last][0]
        events = self.framework_metrics_reader.get_events(begin_s * 1e6, end_s * 1e6)
        self.detailed_figure = _events_figure(
            events,
            self.origin_s,
            f"Framework events from {begin_s - self.origin_s:.1f} s to "
            f"{end_s - self.origin_s:.1f} s",
        )
        self._display(self.detailed_figure)
        return self.detailed_figure
