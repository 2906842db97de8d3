"""``smdebug.profiler.analysis.notebook_utils.timeline_charts``:
``TimelineCharts``, drawn with plotly."""

from trainprobe.report.notebook_charts import TimelineCharts

__all__ = ["TimelineCharts"]
