"""``smdebug.profiler.analysis.utils``: the profiling DataFrames."""
