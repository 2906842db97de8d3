"""Reading profiling data back: system metrics, framework events, steps, Python profiles, and a
merged timeline, by time or step range (the public face is ``trainprobe.profiler``).

Layout, from the data to the user: ``steps`` (when each step ran), ``phase_time`` (each phase's
time, nested phases counted once), ``nodes`` (which host each training process ran on),
``selection`` (time and step ranges), ``output`` (the readers, every record placed in its step),
``python_profiles`` and ``detailed_traces`` (the profiles' files), ``merged_timeline`` (one Chrome
trace), ``frames`` (pandas, imported there only) and ``data`` (``ProfilerData``, the DataFrames).
Everything but ``frames`` and ``data`` works without pandas.

smdebug's profiling analysis, on the same readers, at smdebug's import paths through
``trainprobe.smdebug_names``: ``pandas_frame`` (``PandasFrame``) and ``frame_analysis``
(``PandasFrameAnalysis``), which need pandas; ``profile_analysis`` (``cProfileAnalysis``,
``PyinstrumentAnalysis``, ``StepPhase``; pandas for its tables only), ``metrics_readers`` (the
readers the notebook charts take) and ``timeline_merger`` (``MergedTimeline``).
"""
