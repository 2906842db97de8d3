"""``smdebug.profiler.analysis``: the profiling notebooks' analysis classes."""
