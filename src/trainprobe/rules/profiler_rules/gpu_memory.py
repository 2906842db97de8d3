"""GPUMemoryIncrease: GPU memory that keeps growing.

GPUMemoryIncrease (reference/smdebug.md §5.3) follows each GPU's memory use (GPUMemoryUtilization,
% of its memory in use). With every new reading, once the GPU has more than ``patience`` readings,
it compares the moving average of the newest ``window`` readings with the one smdebug compared it
with, the mean of the readings from ``window + 1`` back to 3 back: ``mean(v[-window:]) -
mean(v[-window-1:-2])``. An increase of more than ``increase`` percentage points is a violation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainprobe.rules.profiler_rules.gpu_series import GpuKey, PerGpu, gpu_label
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.statistics import box
from trainprobe.rules.profiler_rules.window import Window
from trainprobe.storage.system_metrics import (
    GPU_MEMORY_UTILIZATION,
)

__all__ = ["GPUMemoryIncrease"]


class GPUMemoryIncrease(WindowRule):
    """Fires on a large increase of a GPU's memory use."""

    rule_name = "GPUMemoryIncrease"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.memory = PerGpu(GPU_MEMORY_UTILIZATION)
        self.gpus: dict[GpuKey, dict[str, Any]] = {}
        self.largest: tuple[float, GpuKey] | None = None

    def evaluate_window(self, window: Window) -> bool:
        window_size = self.count("window")
        patience = self.count("patience")
        increase = self.number("increase")
        fired = False
        for sample in window.samples():
            for key in self.memory.add(sample):
                series = self.memory.get(key)
                if series is None or len(series) <= patience or len(series) < window_size + 2:
                    continue
                values = series.last(window_size + 1)
                earlier = values[:-2] if len(values) > 2 else values[:-1]
                moving, before = float(np.mean(values[-window_size:])), float(np.mean(earlier))
                grown = moving - before
                state = self.gpus.setdefault(key, {"violations": 0, "largest_increase": grown})
                state["moving_average"] = moving
                state["largest_increase"] = max(state["largest_increase"], grown)
                if self.largest is None or grown > self.largest[0]:
                    self.largest = (grown, key)
                if grown > increase:
                    state["violations"] += 1
                    self.report.violations += 1
                    if not fired:
                        self.record(
                            f"memory use of {gpu_label(key)} rose by {grown:.1f} points to a "
                            f"moving average of {moving:.1f} %",
                            grown,
                            increase,
                        )
                    fired = True
        self.report.datapoints = self.memory.readings()
        by_node: dict[str, dict[str, Any]] = {}
        for key, series in self.memory:
            state = dict(self.gpus.get(key, {"violations": 0}))
            state.update(box(series.values()))
            by_node.setdefault(key[0], {})[key[1]] = state
        self.report.details = {"gpus": by_node}
        return fired

    def recommendation(self) -> str:
        if not len(self.memory):
            return "No GPU memory use was recorded: the rule needs GPUs to judge."
        if self.largest is None:
            return (
                f"{self.memory.readings()} GPU memory readings so far; the rule judges a GPU "
                f"once it has more than {self.count('patience')}."
            )
        grown, key = self.largest
        if self.report.violations:
            return (
                f"The memory use of {gpu_label(key)} rose by up to {grown:.1f} percentage points "
                f"within {self.count('window')} readings (threshold "
                f"{self.number('increase'):g}): look for a memory leak. Do not keep tensors "
                "across steps with their graph (store loss.item(), or detach() what you keep), "
                "clear lists of outputs, and check that the batch or sequence size does not grow."
            )
        return (
            f"GPU memory use was stable: the largest rise of its moving average was "
            f"{grown:.1f} percentage points (threshold {self.number('increase'):g})."
        )
