"""trainprobe: an open, local-first SageMaker Debugger for PyTorch 2.x and XGBoost.

The package is layered: ``config`` (what the user asked for), ``storage`` (bytes on disk or in
object storage), ``capture`` (the hooks, profilers and the system monitor), ``analysis`` (trials
and profiler frames), ``rules``, ``jobs`` and ``report``, and ``cli``. A lower layer never imports
a higher one, and nothing here imports a framework at import time.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
