"""``smdebug.profiler``: the profiler's names; its analysis is ``smdebug.profiler.analysis``."""
