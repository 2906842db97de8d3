"""LowGPUUtilization and LoadBalancing: is each GPU busy, and are the GPUs of a host evenly busy?

LowGPUUtilization (reference/smdebug.md §5.3) looks, for each GPU with more than ``patience``
readings, at its newest ``window`` readings: a 95th percentile below ``threshold_p95`` means the GPU
is underused; a 95th percentile above it with a 5th percentile below ``threshold_p5`` means its use
fluctuates (busy, then idle, then busy). Either is a violation, once per GPU and window.

LoadBalancing compares every two GPUs of a host once both have more than ``patience`` readings: the
histograms of their utilization (50 bins of 2 % from 0 to 100 %) are compared by Jensen-Shannon
distance (natural logarithm, from 0 for the same shape to about 0.83), and a distance above
``threshold`` is a violation.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from trainprobe.rules.profiler_rules.gpu_series import GpuKey, PerGpu, gpu_label
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.statistics import box, histogram, js_distance, percentile
from trainprobe.rules.profiler_rules.window import Window
from trainprobe.storage.system_metrics import GPU_UTILIZATION

__all__ = ["LoadBalancing", "LowGPUUtilization"]

_UTILIZATION_BINS = 50
_UTILIZATION_RANGE = (0.0, 100.0)
_UNDERUSED, _FLUCTUATING, _FINE = "underused", "fluctuating", "fine"


class LowGPUUtilization(WindowRule):
    """Fires when a GPU is underused or its utilization fluctuates."""

    rule_name = "LowGPUUtilization"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.utilization = PerGpu(GPU_UTILIZATION)
        self.gpus: dict[GpuKey, dict[str, Any]] = {}

    def evaluate_window(self, window: Window) -> bool:
        for sample in window.samples():
            self.utilization.add(sample)
        fired = False
        for key, series in self.utilization:
            if len(series) <= self.count("patience"):
                continue
            recent = series.last(self.count("window"))
            p95, p5 = percentile(recent, 95), percentile(recent, 5)
            state = self.gpus.setdefault(key, {"violations": 0})
            state.update(box(recent), p5=p5, status=_FINE)
            if p95 < self.number("threshold_p95"):
                state["status"] = _UNDERUSED
                self.record(
                    f"{gpu_label(key)} underused: p95 {p95:.1f} %",
                    p95,
                    self.number("threshold_p95"),
                )
            elif p5 < self.number("threshold_p5"):
                state["status"] = _FLUCTUATING
                self.record(
                    f"{gpu_label(key)} fluctuates: p95 {p95:.1f} %, p5 {p5:.1f} %",
                    p5,
                    self.number("threshold_p5"),
                )
            if state["status"] != _FINE:
                state["violations"] += 1
                self.report.violations += 1
                fired = True
        self.report.datapoints = self.utilization.readings()
        by_node: dict[str, dict[str, Any]] = {}
        for (node, name), state in sorted(self.gpus.items()):
            by_node.setdefault(node, {})[name] = dict(state)
        self.report.details = {"gpus": by_node, "gpus_seen": len(self.utilization)}
        return fired

    def recommendation(self) -> str:
        if not len(self.utilization):
            return "No GPU utilization was recorded: the rule needs GPUs to judge."
        judged = self.gpus
        if not judged:
            return (
                f"{self.utilization.readings()} GPU readings so far; the rule judges a GPU once "
                f"it has more than {self.count('patience')}."
            )
        underused = [key for key, state in judged.items() if state["status"] == _UNDERUSED]
        fluctuating = [key for key, state in judged.items() if state["status"] == _FLUCTUATING]
        if underused:
            key = underused[0]
            return (
                f"{_listed(underused)} {'was' if len(underused) == 1 else 'were'} underused: "
                f"95 % of the time under {judged[key]['p95']:.0f} % busy (threshold "
                f"{self.number('threshold_p95'):g} %). Increase the batch size or the model, or "
                "use a smaller instance (fewer or smaller GPUs); check the CPUBottleneck, "
                "IOBottleneck and Dataloader rules for what keeps the GPU waiting."
            )
        if fluctuating:
            key = fluctuating[0]
            return (
                f"The utilization of {_listed(fluctuating)} fluctuated: busy above "
                f"{self.number('threshold_p95'):g} % at times, yet under "
                f"{self.number('threshold_p5'):g} % for 5 % of the time (p5 "
                f"{judged[key]['p5']:.0f} %). Look for what leaves it idle between bursts: data "
                "loading, synchronisation between workers, or work on the CPU between steps."
            )
        return "Every GPU was well used in the newest readings."


def _listed(keys: list[GpuKey]) -> str:
    shown = ", ".join(gpu_label(key) for key in keys[:4])
    return shown + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")


class LoadBalancing(WindowRule):
    """Fires when the work is unevenly spread over the GPUs of a host."""

    rule_name = "LoadBalancing"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.utilization = PerGpu(GPU_UTILIZATION)
        self.distances: dict[str, dict[str, float]] = {}
        self.worst: tuple[float, GpuKey, GpuKey] | None = None

    def evaluate_window(self, window: Window) -> bool:
        for sample in window.samples():
            self.utilization.add(sample)
        patience = self.count("patience")
        counts: dict[GpuKey, list[float]] = {}
        for key, series in self.utilization:
            if len(series) > patience:
                counts[key] = histogram(series.values(), _UTILIZATION_BINS, _UTILIZATION_RANGE)[
                    "counts"
                ]
        fired = False
        for first, second in combinations(sorted(counts), 2):
            if first[0] != second[0]:
                continue
            distance = js_distance(counts[first], counts[second])
            self.distances.setdefault(first[0], {})[f"{first[1]}-{second[1]}"] = distance
            if self.worst is None or distance > self.worst[0]:
                self.worst = (distance, first, second)
            if distance > self.number("threshold"):
                self.report.violations += 1
                fired = True
                self.record(
                    f"{first[1]} and {second[1]} on {first[0]} are unevenly used: "
                    f"distance {distance:.3f}",
                    distance,
                    self.number("threshold"),
                )
        self.report.datapoints = self.utilization.readings()
        self.report.details = {
            "distances": {node: dict(pairs) for node, pairs in sorted(self.distances.items())},
            "histograms": {f"{key[0]}/{key[1]}": values for key, values in sorted(counts.items())},
            "bins": histogram([0.0], _UTILIZATION_BINS, _UTILIZATION_RANGE)["bin_edges"],
        }
        return fired

    def recommendation(self) -> str:
        if len(self.utilization) < 2:
            return "Fewer than two GPUs were recorded on a host: there is no load to balance."
        if self.worst is None:
            return (
                f"{self.utilization.readings()} GPU readings so far; the rule compares GPUs once "
                f"each has more than {self.count('patience')}."
            )
        distance, first, second = self.worst
        if distance > self.number("threshold"):
            return (
                f"{first[1]} and {second[1]} on {first[0]} were used unevenly (distance "
                f"{distance:.2f} between their utilization histograms, threshold "
                f"{self.number('threshold'):g}). Check that every GPU gets the same share of the "
                "data and work: with data parallelism, equal batch sizes and a "
                "DistributedSampler; with model parallelism, a more even split of the layers."
            )
        return (
            f"The GPUs were used evenly: the largest distance between two GPUs' utilization "
            f"histograms is {distance:.2f} (threshold {self.number('threshold'):g})."
        )
