"""``smdebug.profiler.analysis.notebook_utils``: ``TrainingJob`` and the charts, drawn with
plotly (``.figure``; ``save_html(path)``)."""

from trainprobe.report.notebook_charts import (
    Heatmap,
    MetricsHistogram,
    StepHistogram,
    StepTimelineChart,
    TimelineCharts,
)

from .training_job import TrainingJob

__all__ = [
    "Heatmap",
    "MetricsHistogram",
    "StepHistogram",
    "StepTimelineChart",
    "TimelineCharts",
    "TrainingJob",
]
