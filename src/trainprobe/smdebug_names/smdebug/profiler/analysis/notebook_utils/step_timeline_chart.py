"""``smdebug.profiler.analysis.notebook_utils.step_timeline_chart``:
``StepTimelineChart``, drawn with plotly."""

from trainprobe.report.notebook_charts import StepTimelineChart

__all__ = ["StepTimelineChart"]
