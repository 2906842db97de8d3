"""Framework profiling for PyTorch: step timeline, torch.profiler, DataLoader and Python profiles.

``FrameworkProfiler(config, out_dir)`` then ``register_module(model)`` and ``close()``; the tensor
hook creates one when a ProfilerConfig file is present. See ``framework_profiler`` for what it
records.
"""

from trainprobe.capture.pytorch.profiling.framework_profiler import FrameworkProfiler

__all__ = ["FrameworkProfiler"]
