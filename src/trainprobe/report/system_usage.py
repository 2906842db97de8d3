"""The report's system usage: each host's and each GPU's use over time, and its percentiles.

Every metric of every host gets exact statistics (``series.summary``). The ones a reader looks at
over time are plotted, downsampled (``series.envelope``): the CPU (all cores, and the I/O wait),
memory, GPU utilisation and memory per GPU, disk and network throughput, the training processes'
CPU; the cores one by one as a heatmap. Times are seconds since the job started.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from trainprobe.report.records import SPREAD, Envelope, Record, Summary, json_key
from trainprobe.report.series import BUCKETS, envelope, rounded, summary
from trainprobe.storage import system_metrics as sm
from trainprobe.storage.metric_series import MetricSeries

__all__ = [
    "CoreHeatmap",
    "HostUsage",
    "MetricPlot",
    "MetricStatistics",
    "PlottedMetric",
    "SystemUsage",
    "system_usage",
]


@dataclass(frozen=True)
class PlottedMetric(Record):
    """One metric on a plot: its label, and its readings made small (``x``, ``mean``...)."""

    label: str
    plot: Envelope = field(metadata=SPREAD)


@dataclass(frozen=True)
class MetricPlot(Record):
    """One plot over time: its title, unit and metrics."""

    title: str
    unit: str
    series: list[PlottedMetric]


@dataclass(frozen=True)
class MetricStatistics(Record):
    """A row of a host's statistics: a metric, its unit, and its figures (``count``...)."""

    metric: str
    type: str
    name: str
    dimension: str
    unit: str
    summary: Summary = field(metadata=SPREAD)


@dataclass(frozen=True)
class CoreHeatmap(Record):
    """Each core's busy % (``z``, a row per core) over the same time buckets (``x``)."""

    cores: list[str]
    x: list[float | None] = field(metadata=json_key("x"))
    z: list[list[float | None]] = field(metadata=json_key("z"))


@dataclass(frozen=True)
class HostUsage(Record):
    """One host: its plots, its cores' heatmap and every metric's statistics."""

    node: str
    plots: list[MetricPlot]
    core_heatmap: CoreHeatmap | None
    statistics: list[MetricStatistics]


@dataclass(frozen=True)
class SystemUsage(Record):
    """The section: each host's use."""

    hosts: list[HostUsage]


# (Type, Dimension) -> (plot, unit); other metrics are in the statistics only.
_PLOTS: dict[tuple[str, str], tuple[str, str]] = {
    (sm.CPU, sm.CPU_UTILIZATION): ("CPU", "%"),
    (sm.CPU, sm.IO_WAIT_PERCENTAGE): ("CPU", "%"),
    (sm.MEMORY, ""): ("Memory", "%"),
    (sm.GPU, sm.GPU_UTILIZATION): ("GPU utilization", "%"),
    (sm.GPU, sm.GPU_MEMORY_UTILIZATION): ("GPU memory", "%"),
    (sm.IO, ""): ("Disk", "bytes/s"),
    (sm.NETWORK, sm.ALGORITHM): ("Network", "bytes/s"),
    (sm.PROCESS, sm.PROCESS_CPU_PERCENT): ("Training processes", "% of one core"),
}
_UNITS = {
    sm.GPU_MEMORY_USED_BYTES: "bytes",
    sm.GPU_MEMORY_BANDWIDTH_UTILIZATION: "%",
    sm.GPU_POWER_WATTS: "W",
    sm.GPU_TEMPERATURE_CELSIUS: "°C",
    sm.MEMORY_USED_BYTES: "bytes",
    sm.PROCESS_MEMORY_USED_BYTES: "bytes",
    sm.PROCESS_COUNT: "processes",
    sm.IOPS: "operations/s",
}
_PLOT_ORDER = (
    "CPU",
    "GPU utilization",
    "GPU memory",
    "Memory",
    "Training processes",
    "Disk",
    "Network",
)


_LABELS = {
    sm.READ_BYTES_PER_SECOND: "disk read",
    sm.WRITE_BYTES_PER_SECOND: "disk write",
    sm.IOPS: "disk operations",
    sm.RECEIVE_BYTES_PER_SECOND: "network receive",
    sm.TRANSMIT_BYTES_PER_SECOND: "network transmit",
    sm.MEMORY_USED_PERCENT: "memory used",
    sm.MEMORY_USED_BYTES: "memory used",
    sm.PROCESS_CPU_PERCENT: "training processes CPU",
    sm.PROCESS_MEMORY_USED_BYTES: "training processes memory",
    sm.PROCESS_COUNT: "training processes",
}


def _label(series: MetricSeries) -> str:
    """What a person calls the metric: ``cpu3 busy``, ``gpu0 GPUUtilization``, ``disk read``."""
    key = series.key
    if key.type == sm.CPU:
        what = "I/O wait" if key.dimension == sm.IO_WAIT_PERCENTAGE else "busy"
        return f"{'all cores' if key.name == sm.CPU_TOTAL else key.name} {what}"
    if key.type == sm.PROCESS:
        return _LABELS.get(key.dimension, f"training processes {key.dimension}")
    if key.name in _LABELS:
        return _LABELS[key.name]
    return f"{key.name} {key.dimension}".strip()


def _plot_and_unit(series: MetricSeries) -> tuple[str | None, str]:
    """The plot that shows ``series`` (None: statistics only) and its unit."""
    key = series.key
    plot = _PLOTS.get((key.type, key.dimension))
    if plot is None:
        return None, _UNITS.get(key.dimension) or _UNITS.get(key.name, "")
    title, unit = plot
    if key.type == sm.CPU and key.name != sm.CPU_TOTAL:
        return None, unit  # each core: in the heatmap and the statistics
    if key.type == sm.IO and key.name == sm.IOPS:
        return None, _UNITS[sm.IOPS]
    return title, unit


def system_usage(
    all_series: Sequence[MetricSeries], start_s: float, time_scale: float
) -> SystemUsage:
    """The section's content: per host, its plots, its core heatmap and its statistics.

    ``start_s`` is the job's start and ``time_scale`` the seconds per unit of the time axis.
    """
    hosts: dict[str, list[MetricSeries]] = {}
    for series in all_series:
        hosts.setdefault(series.node_id, []).append(series)
    return SystemUsage(
        [_host(node_id, found, start_s, time_scale) for node_id, found in sorted(hosts.items())]
    )


def _host(node_id: str, found: list[MetricSeries], start_s: float, time_scale: float) -> HostUsage:
    plots: dict[str, MetricPlot] = {}
    statistics = []
    for series in found:
        plot, unit = _plot_and_unit(series)
        label = _label(series)
        key = series.key
        statistics.append(
            MetricStatistics(label, key.type, key.name, key.dimension, unit, summary(series.values))
        )
        if plot is None:
            continue
        x = (series.timestamps - start_s) / time_scale
        plots.setdefault(plot, MetricPlot(plot, unit, [])).series.append(
            PlottedMetric(label, envelope(x, series.values))
        )
    ordered = [plots[title] for title in _PLOT_ORDER if title in plots]
    return HostUsage(node_id, ordered, _core_heatmap(found, start_s, time_scale), statistics)


def _core_heatmap(
    found: list[MetricSeries], start_s: float, time_scale: float
) -> CoreHeatmap | None:
    """Each core's busy % over time, averaged over the same time buckets for every core."""
    cores = [
        series
        for series in found
        if series.key.type == sm.CPU
        and series.key.dimension == sm.CPU_UTILIZATION
        and series.key.name != sm.CPU_TOTAL
        and series.values.size
    ]
    if not cores:
        return None
    cores.sort(key=lambda series: _core_number(series.key.name))
    first = min(float(series.timestamps[0]) for series in cores)
    last = max(float(series.timestamps[-1]) for series in cores)
    buckets = min(BUCKETS // 2, max(1, max(series.values.size for series in cores)))
    edges = np.linspace(first, last, buckets + 1) if last > first else np.array([first, first + 1])
    rows = []
    for series in cores:
        index = np.clip(
            np.searchsorted(edges, series.timestamps, side="right") - 1, 0, len(edges) - 2
        )
        totals = np.bincount(index, weights=series.values, minlength=len(edges) - 1)
        counts = np.bincount(index, minlength=len(edges) - 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rows.append(rounded(totals / counts, 3))
    return CoreHeatmap(
        [series.key.name for series in cores],
        x=rounded((edges[:-1] - start_s) / time_scale, 7),
        z=rows,
    )


def _core_number(name: str) -> tuple[int, str]:
    digits = name[len("cpu") :]
    return (int(digits), name) if digits.isdigit() else (1 << 30, name)
