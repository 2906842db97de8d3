"""Each GPU's readings of one dimension over the job, as the GPU rules keep them.

GPUs are told apart by host and name (``("algo-1", "gpu0")``); a ``PerGpu`` holds one bounded
``ValueSeries`` per GPU, in arrival order.
"""

from __future__ import annotations

from collections.abc import Iterator

from trainprobe.rules.profiler_rules.statistics import ValueSeries
from trainprobe.rules.profiler_rules.window import Sample, is_gpu

__all__ = ["GpuKey", "PerGpu", "gpu_label"]

GpuKey = tuple[str, str]
"""(host, GPU name)."""


def gpu_label(key: GpuKey) -> str:
    """A GPU in words: ``gpu0 on algo-1``."""
    return f"{key[1]} on {key[0]}"


class PerGpu:
    """One series of ``dimension`` readings per GPU."""

    def __init__(self, dimension: str) -> None:
        self.dimension = dimension
        self.series: dict[GpuKey, ValueSeries] = {}

    def add(self, sample: Sample) -> list[GpuKey]:
        """Append the sample's readings; the GPUs that had one."""
        added = []
        for name, value in sample.values(self.dimension, is_gpu):
            key = (sample.node_id, name)
            series = self.series.get(key)
            if series is None:
                series = self.series[key] = ValueSeries()
            series.append(value)
            added.append(key)
        return added

    def get(self, key: GpuKey) -> ValueSeries | None:
        """One GPU's series, or None when it has no reading of this dimension."""
        return self.series.get(key)

    def __iter__(self) -> Iterator[tuple[GpuKey, ValueSeries]]:
        return iter(sorted(self.series.items()))

    def __len__(self) -> int:
        return len(self.series)

    def readings(self) -> int:
        """How many readings there are, all GPUs together."""
        return sum(len(series) for series in self.series.values())
