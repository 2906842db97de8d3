"""``smdebug.profiler.analysis.python_profile_analysis``: ``cProfileAnalysis`` and
``PyinstrumentAnalysis`` over a job's Python profiles."""

from trainprobe.analysis.profiling_data.profile_analysis import (
    PyinstrumentAnalysis,
    PythonProfileAnalysis,
    cProfileAnalysis,
)

__all__ = ["PyinstrumentAnalysis", "PythonProfileAnalysis", "cProfileAnalysis"]
