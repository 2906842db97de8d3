"""``smdebug.profiler.analysis.notebook_utils.metrics_histogram``:
``MetricsHistogram``, drawn with plotly."""

from trainprobe.report.notebook_charts import MetricsHistogram

__all__ = ["MetricsHistogram"]
