"""``sagemaker.debugger.metrics_config``: the profiling ranges and configurations."""

from trainprobe.config.metrics_config import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    HorovodProfilingConfig,
    MetricsConfigBase,
    PythonProfilingConfig,
    SMDataParallelProfilingConfig,
    StepRange,
    TimeRange,
)

__all__ = [
    "DataloaderProfilingConfig",
    "DetailedProfilingConfig",
    "HorovodProfilingConfig",
    "MetricsConfigBase",
    "PythonProfilingConfig",
    "SMDataParallelProfilingConfig",
    "StepRange",
    "TimeRange",
]
