"""``smdebug.profiler.system_metrics_reader``: the system metrics readers the notebooks create.

``S3SystemMetricsReader`` is the same reader: every path the storage layer reads (``s3://``
included) is read the same way.
"""

from trainprobe.analysis.profiling_data.metrics_readers import LocalSystemMetricsReader

S3SystemMetricsReader = LocalSystemMetricsReader

__all__ = ["LocalSystemMetricsReader", "S3SystemMetricsReader"]
