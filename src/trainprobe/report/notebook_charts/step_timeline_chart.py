"""``StepTimelineChart``: each step's duration over the training's time, as smdebug's notebook
chart of that name (the last ``width`` steps in view; zoom out for the others)."""

from __future__ import annotations

from typing import Any

from plotly import graph_objects as go

from trainprobe.config.errors import ConfigError
from trainprobe.report.notebook_charts.chart import Chart

__all__ = ["StepTimelineChart"]


class StepTimelineChart(Chart):
    """``StepTimelineChart(framework_metrics_reader)``: drawn (and shown) at once, from the
    ``Step:ModeKeys.*`` events up to the reader's latest file."""

    def __init__(self, metrics_reader: Any = None, width: int = 1000) -> None:
        if metrics_reader is None:
            raise ConfigError("metrics_reader", None, "the job's framework metrics reader")
        self.metrics_reader = metrics_reader
        self.width = width
        self.last_timestamp = int(metrics_reader.get_timestamp_of_latest_available_file())
        steps = [
            event
            for event in metrics_reader.get_events(0, self.last_timestamp + 1)
            if event.event_name.startswith("Step")
        ]
        steps.sort(key=lambda event: event.start_time)
        self.steps = [
            [event.start_time / 1e6, event.duration / 1e6, _step_number(event)] for event in steps
        ]
        self.metric_names = [event.event_name for event in steps]
        self.start = self.steps[0][0] if self.steps else 0.0
        self.figure = self._draw()
        self._display()

    def _draw(self) -> Any:
        x = [start - self.start for start, _, _ in self.steps]
        figure = go.Figure(
            go.Scatter(
                x=x,
                y=[duration for _, duration, _ in self.steps],
                mode="lines",
                line_color="blue",
                customdata=[
                    [step, name]
                    for (_, _, step), name in zip(self.steps, self.metric_names, strict=True)
                ],
                hovertemplate="step %{customdata[0]} (%{customdata[1]})<br>"
                "at %{x:.3f} s: %{y:.4f} s<extra></extra>",
                name="step duration",
            )
        )
        if x:
            figure.update_xaxes(range=[x[-min(self.width, len(x))], x[-1]])
        figure.update_layout(
            height=250,
            xaxis_title="Time in seconds since the first step",
            yaxis_title="Step duration in seconds",
            title="Step durations over time",
        )
        return figure


def _step_number(event: Any) -> int:
    try:
        return int(event.event_args.get("step_num", -1))
    except (TypeError, ValueError):
        return -1
