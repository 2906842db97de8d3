"""smdebug's notebook charts (``MetricsHistogram``, ``StepHistogram``, ``StepTimelineChart``,
``TimelineCharts``, ``Heatmap``), drawn with plotly instead of bokeh.

They take smdebug's arguments (the metric readers of ``TrainingJob`` and the selections), show
themselves in Jupyter where smdebug's showed, and keep their plotly figure in ``.figure``;
``save_html(path)`` writes it as a page that opens offline. ``chart`` holds what they share.
"""

from trainprobe.report.notebook_charts.heatmap import Heatmap
from trainprobe.report.notebook_charts.metrics_histogram import MetricsHistogram
from trainprobe.report.notebook_charts.step_histogram import StepHistogram
from trainprobe.report.notebook_charts.step_timeline_chart import StepTimelineChart
from trainprobe.report.notebook_charts.timeline_charts import TimelineCharts

__all__ = ["Heatmap", "MetricsHistogram", "StepHistogram", "StepTimelineChart", "TimelineCharts"]
