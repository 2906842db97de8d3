"""OverallSystemUsage and OverallFrameworkMetrics: the job's resource use and where its time went.

Neither ever fires; their reports feed the profiler report's summaries.

OverallSystemUsage keeps, per host, the distribution (min, p5 ... p99, max) of: CPU (the mean
over the cores), I/O wait, host memory, each GPU's utilization and memory use, network receive and
transmit, and disk read and write throughput (reference/smdebug.md §5.3).

OverallFrameworkMetrics adds up the framework events (``framework_summary.FrameworkTotals``): time
per phase, the split of the step time into forward, backward, optimizer and data waits, the events
that took the most time, the CPU-versus-GPU split of the operations the timeline records, and the
job's phases: initialization (first data to first step), training (first to last step) and
finalization (last step to the end of the data).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainprobe.rules.profiler_rules.framework_summary import FrameworkTotals
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.statistics import ValueSeries, summary
from trainprobe.rules.profiler_rules.window import Sample, Window, is_core, is_gpu
from trainprobe.storage import system_metrics as sm
from trainprobe.storage.modes import STEP_PHASE_PREFIX

__all__ = ["OverallFrameworkMetrics", "OverallSystemUsage"]


def _total_or_mean(dimension: str) -> Callable[[Sample], list[tuple[str, float]]]:
    def read(sample: Sample) -> list[tuple[str, float]]:
        total = sample.value(dimension, sm.CPU_TOTAL)
        if total is not None:
            return [("", total)]
        cores = [value for _, value in sample.values(dimension, is_core)]
        return [("", sum(cores) / len(cores))] if cores else []

    return read


def _named(dimension: str, name: str) -> Callable[[Sample], list[tuple[str, float]]]:
    def read(sample: Sample) -> list[tuple[str, float]]:
        return [(found, value) for found, value in sample.values(dimension) if found == name]

    return read


def _by_type(type_: str, name: str) -> Callable[[Sample], list[tuple[str, float]]]:
    def read(sample: Sample) -> list[tuple[str, float]]:
        return [
            ("", reading.value)
            for reading in sample.readings
            if reading.type == type_ and reading.name == name
        ]

    return read


def _per_gpu(dimension: str) -> Callable[[Sample], list[tuple[str, float]]]:
    def read(sample: Sample) -> list[tuple[str, float]]:
        return sample.values(dimension, is_gpu)

    return read


_METRICS: tuple[tuple[str, Callable[[Sample], list[tuple[str, float]]]], ...] = (
    ("CPU", _total_or_mean(sm.CPU_UTILIZATION)),
    ("I/O wait", _total_or_mean(sm.IO_WAIT_PERCENTAGE)),
    ("Memory", _by_type(sm.MEMORY, sm.MEMORY_USED_PERCENT)),
    ("GPU", _per_gpu(sm.GPU_UTILIZATION)),
    ("GPU memory", _per_gpu(sm.GPU_MEMORY_UTILIZATION)),
    ("Network receive", _named(sm.ALGORITHM, sm.RECEIVE_BYTES_PER_SECOND)),
    ("Network transmit", _named(sm.ALGORITHM, sm.TRANSMIT_BYTES_PER_SECOND)),
    ("Disk read", _by_type(sm.IO, sm.READ_BYTES_PER_SECOND)),
    ("Disk write", _by_type(sm.IO, sm.WRITE_BYTES_PER_SECOND)),
)


class OverallSystemUsage(WindowRule):
    """Summarizes CPU, GPU, memory, I/O and network use per host; it never fires."""

    rule_name = "OverallSystemUsage"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.series: dict[str, dict[str, ValueSeries]] = {}

    def evaluate_window(self, window: Window) -> bool:
        for sample in window.samples():
            node = self.series.setdefault(sample.node_id, {})
            for metric, read in _METRICS:
                for name, value in read(sample):
                    label = f"{metric} {name}" if name else metric
                    node.setdefault(label, ValueSeries()).append(value)
            self.report.datapoints += 1
        self.report.details = {
            "nodes": {
                node: {
                    label: {**summary(series.values()), "unit": _unit(label)}
                    for label, series in sorted(metrics.items())
                }
                for node, metrics in sorted(self.series.items())
            }
        }
        return False

    def recommendation(self) -> str:
        if not self.series:
            return "No system metrics yet."
        parts = []
        for node, metrics in sorted(self.series.items()):
            said = []
            for label in ("CPU", "Memory"):
                if label in metrics:
                    figures = summary(metrics[label].values())
                    said.append(f"{label} p50 {figures['p50']:.0f} %, p95 {figures['p95']:.0f} %")
            gpus = [label for label in metrics if label.startswith("GPU gpu")]
            if gpus:
                busy = [summary(metrics[label].values())["p50"] for label in gpus]
                said.append(
                    f"{len(gpus)} GPU(s), median utilization {min(busy):.0f} to {max(busy):.0f} %"
                )
            parts.append(f"{node}: " + "; ".join(said))
        text = ". ".join(parts) + "."
        idle = [
            label
            for metrics in self.series.values()
            for label, series in metrics.items()
            if label.startswith("GPU gpu") and summary(series.values())["p95"] < 30
        ]
        if idle:
            text += " Some GPUs were mostly idle: see LowGPUUtilization and BatchSize."
        return text


def _unit(label: str) -> str:
    return "bytes/s" if label.startswith(("Network", "Disk")) else "%"


class OverallFrameworkMetrics(WindowRule):
    """Summarizes the time spent in framework operations; it never fires."""

    rule_name = "OverallFrameworkMetrics"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.totals = FrameworkTotals()
        self.job_start_us: float | None = None
        self.job_end_us: float | None = None
        self.framework_expected = True

    def evaluate_window(self, window: Window) -> bool:
        self.framework_expected = window.framework_expected
        self.job_start_us = window.job_start_us
        self.job_end_us = window.end_us if window.final else None
        self.totals.add(window.framework)
        self.report.datapoints = self.totals.events
        self.report.details = {**self.totals.to_json(), "cpu_vs_gpu": self._devices()}
        self.report.details["job_phases_s"] = self._phases()
        return False

    def _devices(self) -> dict[str, float]:
        gpu = cpu = 0.0
        for phase, time_us in self.totals.phase_time_us.items():
            if phase.startswith(STEP_PHASE_PREFIX):
                continue
            if "gpu" in phase.lower():
                gpu += time_us
            else:
                cpu += time_us
        share = gpu / (gpu + cpu) * 100.0 if gpu + cpu else 0.0
        return {"cpu_time_us": cpu, "gpu_time_us": gpu, "gpu_percent": share}

    def _phases(self) -> dict[str, Any]:
        totals = self.totals
        first, last = totals.first_step_start_us, totals.last_step_end_us

        def seconds(start: float | None, end: float | None) -> float | None:
            return None if start is None or end is None else (end - start) / 1e6

        return {
            "initialization": seconds(self.job_start_us, first),
            "training": seconds(first, last),
            "finalization": seconds(last, self.job_end_us),
        }

    def recommendation(self) -> str:
        totals = self.totals
        if not totals.steps:
            if not self.framework_expected or not totals.events:
                return (
                    "No steps recorded: enable framework profiling for a breakdown of the "
                    "training time."
                )
            return "No steps recorded yet."
        split = totals.step_split()
        parts = [
            f"{phase} {figures['percent_of_step_time']:.0f} %"
            for phase, figures in sorted(
                split.items(), key=lambda item: -item[1]["percent_of_step_time"]
            )[:4]
        ]
        text = f"{totals.steps} steps; of the step time: " + ", ".join(parts) + "."
        if totals.data_loading_share() > 30:
            text += (
                " Waiting for data takes a large share of each step: use more DataLoader "
                "workers, pin_memory=True and prefetching, or a faster data format."
            )
        return text
