"""``smdebug.profiler.python_profile_utils``: ``StepPhase``, ``PythonProfileModes`` and the
cProfile timers, as the Python profile analysis takes them."""

from trainprobe.analysis.profiling_data.profile_analysis import (
    PythonProfileModes,
    StepPhase,
    python_profile_mode_to_str,
    str_to_python_profile_mode,
)
from trainprobe.config.metrics_config import cProfileTimer

__all__ = [
    "PythonProfileModes",
    "StepPhase",
    "cProfileTimer",
    "python_profile_mode_to_str",
    "str_to_python_profile_mode",
]
