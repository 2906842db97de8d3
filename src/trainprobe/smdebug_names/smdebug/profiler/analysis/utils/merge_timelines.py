"""``smdebug.profiler.analysis.utils.merge_timelines``: ``MergedTimeline(path,
file_suffix_filter, output_directory).merge_timeline(start, end, unit)``."""

from trainprobe.analysis.profiling_data.timeline_merger import MergeUnit
from trainprobe.analysis.profiling_data.timeline_merger import TimelineMerger as MergedTimeline

__all__ = ["MergeUnit", "MergedTimeline"]
