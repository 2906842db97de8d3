"""``TimelineCharts``: the selected system metrics over time, one panel per dimension, above the
training's framework events by phase, as smdebug's notebook chart of that name.

``plot_detailed_profiler_data([first, last])`` draws the framework events between two readings
(positions in a dimension's series, as the chart's x axis numbers them in smdebug), with the
detailed profiler's operators and kernels there as smdebug's reader gave them (phases
``cpu_functions`` and ``gpu_functions-dev:<device>``); ``find_time_annotations([first, last])``
prints the time spent in each event between them. A range that holds no event says so, and
where the training's events and the detailed profiles are.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from plotly import graph_objects as go
from plotly.subplots import make_subplots

from trainprobe.analysis.profiling_data.detailed_traces import (
    list_detailed_traces,
    read_trace_events,
)
from trainprobe.analysis.profiling_data.metrics_readers import FrameworkEvent
from trainprobe.analysis.profiling_data.nodes import host_first
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


_GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def _number(value: object) -> float | None:
    """``value`` as a float when it is a number (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _detailed_events(profiler_output: str, begin_us: float, end_us: float) -> list[FrameworkEvent]:
    """The detailed profiler's operators and kernels that overlap ``[begin_us, end_us]``, as
    smdebug's framework reader gave them: phase ``cpu_functions``, or
    ``gpu_functions-dev:<device>`` for a GPU's kernels and copies."""
    found: list[FrameworkEvent] = []
    for trace in list_detailed_traces(profiler_output):
        if trace.start_us > end_us:
            continue
        for event in read_trace_events(trace):
            start, duration = _number(event.get("ts")), _number(event.get("dur", 0))
            if event.get("ph") != "X" or event.get("cat") == "Trace":
                continue  # the profiler's own span, flows and instants
            if start is None or duration is None:
                continue
            if start + duration < begin_us or start > end_us:
                continue
            args = event.get("args")
            args = dict(args) if isinstance(args, dict) else {}
            phase = "cpu_functions"
            if event.get("cat") in _GPU_CATEGORIES:
                phase = f"gpu_functions-dev:{args.get('device', 0)}"
            pid, tid = event.get("pid"), event.get("tid")
            found.append(
                FrameworkEvent(
                    str(event.get("name", "")),
                    phase,
                    start,
                    start + duration,
                    host_first(trace.node_id),
                    pid if isinstance(pid, int) else 0,
                    tid if isinstance(tid, int) else 0,
                    args,
                )
            )
    return found


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

    def _selected(self, indexes: list[int]) -> tuple[int, int, float, float]:
        """(first, last, begin_s, end_s): the readings ``indexes`` spans in the first selected
        dimension (a position past the last reading is the last) and their times."""
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
        return first, last, total[first][0], total[last][0]

    def _reading_at(self, time_s: float) -> int:
        """The position of the first reading at or after ``time_s`` (the last one at most)."""
        times = [time for time, _ in self.series.series[self.filtered_dimensions[0]]["total"]]
        return min(bisect_left(times, time_s), len(times) - 1)

    def _nothing_between(self, first: int, last: int, begin_s: float, end_s: float) -> str:
        """Why readings ``first`` to ``last`` show no event: where the events are instead."""
        text = (
            f"No framework event from {begin_s - self.origin_s:.1f} s to "
            f"{end_s - self.origin_s:.1f} s (readings {first} to {last})."
        )
        events = self.framework_events
        if events:
            start_s = min(event.start_time for event in events) / 1e6
            stop_s = max(event.end_time for event in events) / 1e6
            text += (
                f" The training's events run from {start_s - self.origin_s:.1f} s to "
                f"{stop_s - self.origin_s:.1f} s: readings {self._reading_at(start_s)} to "
                f"{self._reading_at(stop_s)}."
            )
        root = getattr(self.framework_metrics_reader, "trace_root_folder", None)
        traces = list_detailed_traces(root) if isinstance(root, str) else []
        for trace in traces[:3]:
            start_s = trace.start_us / 1e6
            text += (
                f" The detailed profile of step {trace.start_step} starts at "
                f"{start_s - self.origin_s:.1f} s (reading {self._reading_at(start_s)})."
            )
        if not events and not traces:
            text += " The job wrote no framework events: was framework profiling on?"
        return text

    def _events_between(self, begin_s: float, end_s: float) -> list[Any]:
        """The framework events and the detailed profiler's events between two times."""
        reader = self.framework_metrics_reader
        events = list(reader.get_events(begin_s * 1e6, end_s * 1e6))
        root = getattr(reader, "trace_root_folder", None)
        if isinstance(root, str):
            events += _detailed_events(root, begin_s * 1e6, end_s * 1e6)
        return events

    def find_time_annotations(self, indexes: list[int]) -> None:
        """Print the time between the ``min(indexes)``-th and the ``max(indexes)``-th reading
        and the time spent in each framework event there (by step where it has one)."""
        first, last, begin_s, end_s = self._selected(indexes)
        print(f"Selected timerange: {begin_s} to {end_s}")
        spent: dict[str, float] = {}
        events = self._events_between(begin_s, end_s)
        for event in events:
            step = (event.event_args or {}).get("step_num")
            key = event.event_name if step is None else f"{event.event_name}_{step}"
            spent[key] = spent.get(key, 0.0) + event.duration / 1000.0
        for name, milliseconds in spent.items():
            print(f"Spent {milliseconds:.3f} ms (cumulative time) in {name}")
        if not events:
            print(self._nothing_between(first, last, begin_s, end_s))

    def plot_detailed_profiler_data(self, indexes: list[int]) -> Any:
        """Draw (and show) the framework events and the detailed profiler's operators and
        kernels between the ``min(indexes)``-th and the ``max(indexes)``-th reading of the first
        selected dimension (a position past the last reading is the last); return the figure.
        A range without events prints where they are instead."""
        first, last, begin_s, end_s = self._selected(indexes)
        print(f"Selected timerange: {begin_s} to {end_s}")
        events = self._events_between(begin_s, end_s)
        if not events:
            print(self._nothing_between(first, last, begin_s, end_s))
        self.detailed_figure = _events_figure(
            events,
            self.origin_s,
            f"Framework events from {begin_s - self.origin_s:.1f} s to "
            f"{end_s - self.origin_s:.1f} s",
        )
        self._display(self.detailed_figure)
        return self.detailed_figure
