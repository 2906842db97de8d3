"""``sagemaker.debugger.utils``: the Python profiler and cProfile timer choices."""

from trainprobe.config.metrics_config import PythonProfiler, cProfileTimer

__all__ = ["PythonProfiler", "cProfileTimer"]
