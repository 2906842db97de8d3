"""``smdebug.profiler.analysis.notebook_utils``: ``TrainingJob`` (the charts are not here)."""
