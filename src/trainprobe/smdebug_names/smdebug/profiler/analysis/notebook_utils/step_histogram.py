"""``smdebug.profiler.analysis.notebook_utils.step_histogram``:
``StepHistogram``, drawn with plotly."""

from trainprobe.report.notebook_charts import StepHistogram

__all__ = ["StepHistogram"]
