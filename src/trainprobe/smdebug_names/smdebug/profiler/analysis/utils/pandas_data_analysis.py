"""``smdebug.profiler.analysis.utils.pandas_data_analysis``: ``PandasFrameAnalysis`` over
``PandasFrame``'s DataFrames, with ``StatsBy`` and ``Resource``."""

from trainprobe.analysis.profiling_data.frame_analysis import (
    JobStats,
    PandasFrameAnalysis,
    Resource,
    StatsBy,
)

__all__ = ["JobStats", "PandasFrameAnalysis", "Resource", "StatsBy"]
