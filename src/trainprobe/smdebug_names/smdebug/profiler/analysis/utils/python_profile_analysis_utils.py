"""``smdebug.profiler.analysis.utils.python_profile_analysis_utils``: what the Python profile
analysis returns (``cProfileStats``...) and ``Metrics``, its sort keys."""

from trainprobe.analysis.profiling_data.profile_analysis import (
    Metrics,
    PyinstrumentStepStats,
    StepPhase,
    StepPythonProfileStats,
    cProfileFunctionStats,
    cProfileStats,
)

__all__ = [
    "Metrics",
    "PyinstrumentStepStats",
    "StepPhase",
    "StepPythonProfileStats",
    "cProfileFunctionStats",
    "cProfileStats",
]
