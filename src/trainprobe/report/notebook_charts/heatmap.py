"""``Heatmap``: the selected system metrics as a heatmap, one row per dimension and event (per
node with ``show_workers``), time across, as smdebug's notebook chart of that name."""

from __future__ import annotations

from typing import Any

from plotly import graph_objects as go

from trainprobe.report.notebook_charts.chart import Chart, group_readings, matching

__all__ = ["Heatmap"]


class Heatmap(Chart):
    """``Heatmap(system_metrics_reader, select_metrics, starttime, endtime, select_dimensions,
    select_events, plot_height)``: drawn (and shown) at once; times in microseconds since the
    epoch. ``select_metrics`` is accepted and unused, as in smdebug (the notebooks pass the
    framework reader there)."""

    def __init__(
        self,
        metrics_reader: Any,
        select_metrics: Any = None,
        starttime: float = 0,
        endtime: float | None = None,
        select_dimensions: list[str] | None = None,
        select_events: list[str] | None = None,
        plot_height: int = 350,
        show_workers: bool = True,
    ) -> None:
        self.metrics_reader = metrics_reader
        if endtime is None:
            endtime = metrics_reader.get_timestamp_of_latest_available_file() + 1
        self.last_timestamp_system_metrics = int(endtime)
        self.select_dimensions = (
            [".*CPU", ".*GPU"] if select_dimensions is None else select_dimensions
        )
        self.select_events = [".*"] if select_events is None else select_events
        self.plot_height = plot_height
        self.show_workers = show_workers
        readings = metrics_reader.get_events(starttime, endtime)
        self.origin_s = min((reading.timestamp for reading in readings), default=0.0)
        series = group_readings(readings, show_workers)
        dimensions = matching(series.dimensions, self.select_dimensions, anywhere=False)
        events = matching(series.events, self.select_events, anywhere=True)
        self.rows = [
            (f"{dimension}_{event}", series.series[dimension][event])
            for dimension in dimensions
            for event in events
            if event in series.series[dimension]
        ]
        self.figure = self._draw()
        self._display()

    def _draw(self) -> Any:
        times = sorted({time for _, points in self.rows for time, _ in points})
        column = {time: number for number, time in enumerate(times)}
        z: list[list[float | None]] = []
        for _, points in self.rows:
            line: list[float | None] = [None] * len(times)
            for time, value in points:
                line[column[time]] = value
            z.append(line)
        figure = go.Figure(
            go.Heatmap(
                z=z,
                x=[time - self.origin_s for time in times],
                y=[name for name, _ in self.rows],
                zmin=0,
                zmax=100,
                colorscale="Viridis",
                colorbar_title="%",
            )
        )
        figure.update_layout(
            height=self.plot_height,
            xaxis_title="Time in seconds",
            title="System utilization",
        )
        return figure
