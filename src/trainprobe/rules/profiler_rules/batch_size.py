"""BatchSize: a batch too small to use the machine.

BatchSize looks at each host once it has more than ``window`` and more than ``patience`` samples:
when the 95th percentile of its CPU utilization (the mean over its cores) over the newest
``window`` samples is below ``cpu_threshold_p95``, each of its GPUs whose utilization and memory
use both have a 95th percentile below theirs (``gpu_threshold_p95``,
``gpu_memory_threshold_p95``) is a violation: everything is lightly used, so the batch is likely
too small.
"""

from __future__ import annotations

from trainprobe.rules.profiler_rules.gpu_series import GpuKey, PerGpu, gpu_label
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.statistics import ValueSeries, percentile
from trainprobe.rules.profiler_rules.window import Sample, Window, is_core
from trainprobe.storage.system_metrics import (
    CPU_TOTAL,
    CPU_UTILIZATION,
    GPU_MEMORY_UTILIZATION,
    GPU_UTILIZATION,
)

__all__ = ["BatchSize"]


def _cpu_percent(sample: Sample) -> float | None:
    """The host's CPU utilization in one sample: cpu_total, else the mean of its cores."""
    total = sample.value(CPU_UTILIZATION, CPU_TOTAL)
    if total is not None:
        return total
    cores = [value for _, value in sample.values(CPU_UTILIZATION, is_core)]
    return sum(cores) / len(cores) if cores else None


class BatchSize(WindowRule):
    """Fires when CPU, GPU and GPU memory are all lightly used: the batch may be too small."""

    rule_name = "BatchSize"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.cpu: dict[str, ValueSeries] = {}
        self.utilization = PerGpu(GPU_UTILIZATION)
        self.memory = PerGpu(GPU_MEMORY_UTILIZATION)
        self.flagged: dict[GpuKey, dict[str, float]] = {}
        self.judged: dict[str, float] = {}

    def evaluate_window(self, window: Window) -> bool:
        for sample in window.samples():
            cpu = _cpu_percent(sample)
            if cpu is not None:
                self.cpu.setdefault(sample.node_id, ValueSeries()).append(cpu)
            self.utilization.add(sample)
            self.memory.add(sample)
        size = self.count("window")
        fired = False
        for node, cpu_series in sorted(self.cpu.items()):
            if len(cpu_series) <= max(size, self.count("patience")):
                continue
            cpu_p95 = percentile(cpu_series.last(size), 95)
            self.judged[node] = cpu_p95
            if cpu_p95 >= self.number("cpu_threshold_p95"):
                continue
            for key, series in self.utilization:
                memory = self.memory.get(key)
                if key[0] != node or memory is None:
                    continue
                gpu_p95 = percentile(series.last(size), 95)
                memory_p95 = percentile(memory.last(size), 95)
                if gpu_p95 < self.number("gpu_threshold_p95") and memory_p95 < self.number(
                    "gpu_memory_threshold_p95"
                ):
                    self.flagged[key] = {
                        "cpu_p95": cpu_p95,
                        "gpu_p95": gpu_p95,
                        "gpu_memory_p95": memory_p95,
                    }
                    self.report.violations += 1
                    fired = True
                    self.record(
                        f"{gpu_label(key)}: CPU p95 {cpu_p95:.0f} %, GPU p95 {gpu_p95:.0f} %, "
                        f"GPU memory p95 {memory_p95:.0f} %",
                        gpu_p95,
                        self.number("gpu_threshold_p95"),
                    )
        self.report.datapoints = sum(len(series) for series in self.cpu.values())
        self.report.details = {
            "cpu_p95": dict(sorted(self.judged.items())),
            "underused_gpus": {
                f"{node}/{name}": figures for (node, name), figures in sorted(self.flagged.items())
            },
        }
        return fired

    def recommendation(self) -> str:
        if not len(self.utilization):
            return "No GPU utilization was recorded: the rule needs GPUs to judge."
        if not self.judged:
            return (
                f"{self.report.datapoints} samples so far; the rule judges a host once it has "
                f"more than {max(self.count('window'), self.count('patience'))}."
            )
        if self.flagged:
            key, figures = next(iter(sorted(self.flagged.items())))
            return (
                f"The CPU (p95 {figures['cpu_p95']:.0f} %), {gpu_label(key)} (p95 "
                f"{figures['gpu_p95']:.0f} %) and its memory (p95 {figures['gpu_memory_p95']:.0f} "
                "%) were all lightly used: the batch size may be too small. Increase the batch "
                "size (and scale the learning rate with it), or move to a smaller instance."
            )
        return "The CPU or the GPUs were well used: nothing suggests a batch that is too small."
