"""Every GPU that NVML sees: utilisation, memory, power and temperature, through ``pynvml``.

Without NVML (no driver, no GPU, no ``nvidia-ml-py``) ``Gpus.open()`` says so in one log line and
returns None: the GPU readings are simply absent. A metric a GPU does not support (power on some
boards) is dropped for that GPU; any other NVML failure while sampling skips that GPU for the
sample and is logged once. ``GPUMemoryUtilization`` is the share of the GPU's memory in use, the
footprint smdebug's GPUMemoryIncrease and BatchSize rules reason about; NVML's own "memory
utilisation" (how busy the memory bus was) is ``GPUMemoryBandwidthUtilization``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from trainprobe.storage import system_metrics as sm
from trainprobe.storage.system_metrics import Reading

__all__ = ["Gpus"]

log = logging.getLogger(__name__)


class Gpus:
    """The GPUs of this host, opened through NVML; ``close()`` releases NVML."""

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self._nvml = nvml
        self._handles = handles
        self._unsupported: set[tuple[int, str]] = set()
        self._failure_logged = False
        self._keys = [_keys(f"gpu{index}") for index in range(len(handles))]

    @property
    def count(self) -> int:
        """How many GPUs are sampled."""
        return len(self._handles)

    @classmethod
    def open(cls) -> Gpus | None:
        """The host's GPUs, or None (after one log line) when NVML cannot show any."""
        try:
            import pynvml
        except ImportError as error:
            log.info("no GPU metrics: nvidia-ml-py is not installed (%s)", error)
            return None
        try:
            pynvml.nvmlInit()
        except (pynvml.NVMLError, OSError) as error:
            log.info("no GPU metrics: NVML is not available (%s)", error)
            return None
        try:
            count = pynvml.nvmlDeviceGetCount()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(index) for index in range(count)]
        except pynvml.NVMLError as error:
            log.info("no GPU metrics: NVML cannot list the GPUs (%s)", error)
            _shutdown(pynvml)
            return None
        if not handles:
            log.info("no GPU metrics: NVML sees no GPU")
            _shutdown(pynvml)
            return None
        return cls(pynvml, handles)

    def sample(self) -> list[Reading]:
        """The readings of every GPU now."""
        readings: list[Reading] = []
        for index, handle in enumerate(self._handles):
            keys = self._keys[index]
            for metric, read in _METRICS:
                if (index, metric) in self._unsupported:
                    continue
                try:
                    values = read(self._nvml, handle)
                except self._nvml.NVMLError as error:
                    if _not_supported(self._nvml, error):
                        self._unsupported.add((index, metric))
                    elif not self._failure_logged:
                        self._failure_logged = True
                        log.warning("GPU %d: NVML failed reading its %s: %s", index, metric, error)
                    continue
                readings += [(keys[name], value) for name, value in values]
        return readings

    def close(self) -> None:
        """Release NVML."""
        _shutdown(self._nvml)


def _keys(name: str) -> dict[str, sm.MetricKey]:
    return {
        sm.GPU_UTILIZATION: sm.MetricKey(sm.GPU, name, sm.GPU_UTILIZATION),
        sm.GPU_MEMORY_UTILIZATION: sm.MetricKey(sm.GPU, name, sm.GPU_MEMORY_UTILIZATION),
        **{
            dimension: sm.MetricKey(sm.ACCELERATOR, name, dimension)
            for dimension in (
                sm.GPU_MEMORY_USED_BYTES,
                sm.GPU_MEMORY_BANDWIDTH_UTILIZATION,
                sm.GPU_POWER_WATTS,
                sm.GPU_TEMPERATURE_CELSIUS,
            )
        },
    }


def _utilization(nvml: Any, handle: Any) -> list[tuple[str, float]]:
    rates = nvml.nvmlDeviceGetUtilizationRates(handle)
    return [
        (sm.GPU_UTILIZATION, float(rates.gpu)),
        (sm.GPU_MEMORY_BANDWIDTH_UTILIZATION, float(rates.memory)),
    ]


def _memory(nvml: Any, handle: Any) -> list[tuple[str, float]]:
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    if not memory.total:
        return []
    return [
        (sm.GPU_MEMORY_UTILIZATION, memory.used / memory.total * 100.0),
        (sm.GPU_MEMORY_USED_BYTES, int(memory.used)),
    ]


def _power(nvml: Any, handle: Any) -> list[tuple[str, float]]:
    return [(sm.GPU_POWER_WATTS, nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)]  # milliwatts


def _temperature(nvml: Any, handle: Any) -> list[tuple[str, float]]:
    celsius = nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
    return [(sm.GPU_TEMPERATURE_CELSIUS, float(celsius))]


_METRICS = (
    ("utilisation", _utilization),
    ("memory", _memory),
    ("power", _power),
    ("temperature", _temperature),
)


def _not_supported(nvml: Any, error: Exception) -> bool:
    return bool(getattr(error, "value", None) == nvml.NVML_ERROR_NOT_SUPPORTED)


def _shutdown(nvml: Any) -> None:
    with contextlib.suppress(nvml.NVMLError):
        nvml.nvmlShutdown()
