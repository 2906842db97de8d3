"""CPUBottleneck and IOBottleneck: the GPU idles while the CPU is busy, or waits for I/O.

Both count samples (reference/smdebug.md §5.3). A sample is a bottleneck when one of its GPUs is
below ``gpu_threshold`` % busy while one of its CPU readings is above ``cpu_threshold`` %
(CPUUtilization) or ``io_threshold`` % (I/OWaitPercentage). Once more than ``patience`` samples are
in, the rule fires in each window where bottlenecks make up more than ``threshold`` % of all the
samples so far. The framework events around the bottleneck samples are added up, so the report can
say what the training was doing meanwhile (waiting for data, in its forward pass, ...).

A host without GPU readings has no GPU to wait: its samples count, but are never bottlenecks.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any, ClassVar

import numpy as np

from trainprobe.rules.profiler_rules.framework_summary import FrameworkTotals, events_near
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.window import Sample, Window, is_gpu
from trainprobe.storage.system_metrics import (
    CPU_UTILIZATION,
    GPU_UTILIZATION,
    IO_WAIT_PERCENTAGE,
)

__all__ = ["CPUBottleneck", "IOBottleneck"]

_DEFAULT_HALF_INTERVAL_US = 250_000.0


def _half_interval_us(samples: list[Sample]) -> float:
    """Half the usual time between two samples of one host: the span a sample stands for."""
    gaps = []
    by_node: dict[str, list[float]] = {}
    for sample in samples:
        by_node.setdefault(sample.node_id, []).append(sample.timestamp)
    for times in by_node.values():
        gaps += [later - earlier for earlier, later in pairwise(times)]
    if not gaps:
        return _DEFAULT_HALF_INTERVAL_US
    return float(np.median(gaps)) * 1e6 / 2


class _Bottleneck(WindowRule):
    """What CPUBottleneck and IOBottleneck share (see the module docstring).

    A subclass names the reading that makes a sample busy and the words of its recommendation;
    ``{threshold}`` in a text is the value of ``busy_parameter``.
    """

    busy_dimension: ClassVar[str]
    busy_parameter: ClassVar[str]
    busy_words: ClassVar[str]
    """When a sample is busy, as in "while <busy_words>"."""
    busy_meanwhile: ClassVar[str]
    """What the CPU did while the GPU was idle, as in "while <busy_meanwhile> in 60 %"."""
    waited_on: ClassVar[str]
    bottleneck: ClassVar[str]
    culprit: ClassVar[str]
    advice: ClassVar[str]

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.samples = 0
        self.samples_with_gpu = 0
        self.bottlenecks = 0
        self.nodes: dict[str, dict[str, int]] = {}
        self.during = FrameworkTotals()

    @property
    def percent(self) -> float:
        """Bottleneck samples, in % of all the samples so far."""
        return self.bottlenecks / self.samples * 100.0 if self.samples else 0.0

    def evaluate_window(self, window: Window) -> bool:
        gpu_threshold = self.number("gpu_threshold")
        busy_threshold = self.number(self.busy_parameter)
        moments = []
        samples = window.samples()
        for sample in samples:
            node = self.nodes.setdefault(sample.node_id, {"datapoints": 0, "bottlenecks": 0})
            node["datapoints"] += 1
            self.samples += 1
            gpus = sample.values(GPU_UTILIZATION, is_gpu)
            if gpus:
                self.samples_with_gpu += 1
            idle = any(value < gpu_threshold for _, value in gpus)
            busy = any(value > busy_threshold for _, value in sample.values(self.busy_dimension))
            if idle and busy:
                self.bottlenecks += 1
                node["bottlenecks"] += 1
                moments.append(sample.timestamp * 1e6)
        if moments:
            self.during.add(events_near(window.framework, moments, _half_interval_us(samples)))
        self.report.datapoints = self.samples
        self.report.violations = self.bottlenecks
        self.report.details = self._details()
        if self.samples <= self.count("patience") or self.percent <= self.number("threshold"):
            return False
        self.record(
            f"bottlenecks in {self.percent:.1f} % of {self.samples} samples",
            value=round(self.percent, 2),
            threshold=self.number("threshold"),
        )
        return True

    def recommendation(self) -> str:
        waiting = self._state()
        if waiting is not None:
            return waiting
        if self.percent > self.number("threshold"):
            return (
                f"The GPU was idle (below {self.number('gpu_threshold'):g} %) while "
                + self._with_threshold(self.busy_meanwhile)
                + f" in {self.percent:.0f} % of the samples: {self.culprit}."
                + self._meanwhile()
                + " "
                + self.advice
            )
        return (
            f"The GPU waited on {self.waited_on} in {self.percent:.0f} % of the samples, not "
            f"more than the threshold of {self.number('threshold'):g} %: no {self.bottleneck} "
            "bottleneck."
        )

    def _with_threshold(self, text: str) -> str:
        return text.format(threshold=self.number(self.busy_parameter))

    def _details(self) -> dict[str, Any]:
        return {
            "datapoints": self.samples,
            "datapoints_with_gpu": self.samples_with_gpu,
            "bottlenecks": self.bottlenecks,
            "percent": self.percent,
            "nodes": {name: dict(counts) for name, counts in sorted(self.nodes.items())},
            "framework_during_bottlenecks": self.during.to_json(),
        }

    def _state(self) -> str | None:
        """Why there is no judgement yet, or None when there is one."""
        if not self.samples:
            return "No system metrics yet: the rule needs the system monitor's readings."
        if not self.samples_with_gpu:
            return (
                "No GPU utilization was recorded, so no GPU waited: the rule looks for samples "
                f"where a GPU is below {self.number('gpu_threshold'):g} % busy while "
                + self._with_threshold(self.busy_words)
                + "."
            )
        if self.samples <= self.count("patience"):
            return (
                f"{self.samples} samples so far; the rule judges once it has more than "
                f"{self.count('patience')}."
            )
        return None

    def _meanwhile(self) -> str:
        if not self.during.steps:
            return ""
        waiting = self.during.data_loading_share()
        return (
            f" Around these samples the training spent {waiting:.0f} % of its step time "
            "waiting for data."
        )


class CPUBottleneck(_Bottleneck):
    """Fires when the GPU waits on a busy CPU too much of the time."""

    rule_name = "CPUBottleneck"
    busy_dimension = CPU_UTILIZATION
    busy_parameter = "cpu_threshold"
    busy_words = "a CPU core is above {threshold:g} %"
    busy_meanwhile = "the CPU was saturated (a core above {threshold:g} %)"
    waited_on = "a busy CPU"
    bottleneck = "CPU"
    culprit = "the CPU is the bottleneck"
    advice = (
        "Increase num_workers of your DataLoader, move data preprocessing onto the GPU or ahead "
        "of the training, and keep Python work out of the training loop."
    )


class IOBottleneck(_Bottleneck):
    """Fires when the GPU waits on I/O too much of the time."""

    rule_name = "IOBottleneck"
    busy_dimension = IO_WAIT_PERCENTAGE
    busy_parameter = "io_threshold"
    busy_words = "the CPU waits for I/O more than {threshold:g} % of the time"
    busy_meanwhile = "the CPU waited for I/O (above {threshold:g} %)"
    waited_on = "I/O"
    bottleneck = "I/O"
    culprit = "reading data is the bottleneck"
    advice = (
        "Read from faster storage (a local disk rather than a network file system), cache or "
        "pre-fetch the data set, store it in fewer, larger files, and use more DataLoader "
        "workers so that reading overlaps with computing."
    )
