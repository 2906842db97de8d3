"""``smdebug.profiler.algorithm_metrics_reader``: the framework metrics readers the notebooks
create. ``S3AlgorithmMetricsReader`` is the same reader: every path the storage layer reads
(``s3://`` included) is read the same way.
"""

from trainprobe.analysis.profiling_data.metrics_readers import LocalAlgorithmMetricsReader

S3AlgorithmMetricsReader = LocalAlgorithmMetricsReader

__all__ = ["LocalAlgorithmMetricsReader", "S3AlgorithmMetricsReader"]
