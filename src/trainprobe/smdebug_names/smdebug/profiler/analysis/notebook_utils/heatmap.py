"""``smdebug.profiler.analysis.notebook_utils.heatmap``:
``Heatmap``, drawn with plotly."""

from trainprobe.report.notebook_charts import Heatmap

__all__ = ["Heatmap"]
