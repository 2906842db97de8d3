"""``smdebug.profiler.analysis.utils.profiler_data_to_pandas``: ``PandasFrame``."""

from trainprobe.analysis.profiling_data.pandas_frame import PandasFrame

__all__ = ["PandasFrame"]
