"""The report's training job summary: how long the job spent starting, training and ending.

Initialisation runs from the job's first data (a system reading or a framework event) to the
start of its first step, training from there to the end of its last step, finalisation from
there to the job's last data: the phases SageMaker's report names, measured the same way as
MaxInitializationTime measures them.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from trainprobe.analysis.profiling_data.steps import StepSpan
from trainprobe.config.statuses import TrainingJobStatus
from trainprobe.storage.metric_series import MetricSeries

__all__ = ["job_summary", "time_axis"]


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds")


def job_summary(
    name: str,
    ended: bool,
    series: Sequence[MetricSeries],
    spans: Sequence[StepSpan],
) -> dict[str, Any]:
    """The section's content (times in seconds since the epoch, and ISO 8601 in UTC)."""
    starts = [float(found.timestamps[0]) for found in series if found.timestamps.size]
    ends = [float(found.timestamps[-1]) for found in series if found.timestamps.size]
    first_step = min((span.start_us for span in spans), default=None)
    last_step = max((span.end_us for span in spans), default=None)
    if spans:
        starts.append(min(span.wait_start_us for span in spans) / 1e6)
        ends.append(max(span.end_us for span in spans) / 1e6)
    start = min(starts, default=None)
    end = max(ends, default=None)
    first_step_s = None if first_step is None else first_step / 1e6
    last_step_s = None if last_step is None else last_step / 1e6
    training_s = None if first_step_s is None or last_step_s is None else last_step_s - first_step_s
    steps = len({span.step for span in spans})
    return {
        "Name": name,
        "Status": "Ended" if ended else TrainingJobStatus.IN_PROGRESS,
        "Start": start,
        "End": end,
        "StartTime": _iso(start),
        "EndTime": _iso(end),
        "FirstStepStart": first_step_s,
        "LastStepEnd": last_step_s,
        "InitializationSeconds": _between(start, first_step_s),
        "TrainingSeconds": training_s,
        "FinalizationSeconds": _between(last_step_s, end) if ended else None,
        "TotalSeconds": _between(start, end),
        "Steps": steps,
        "StepsPerSecond": steps / training_s if training_s else None,
        "Hosts": sorted({found.node_id for found in series}),
        "TrainingProcesses": sorted({span.node_id for span in spans}),
        "GPUs": len(
            {(found.node_id, found.key.name) for found in series if found.key.type == "gpu"}
        ),
    }


def _between(first: float | None, last: float | None) -> float | None:
    return None if first is None or last is None else max(0.0, last - first)


def time_axis(total_seconds: float | None) -> tuple[str, float]:
    """The unit of the report's time axes, and its seconds, for a job of this length."""
    seconds = total_seconds or 0.0
    if seconds < 600:
        return "s", 1.0
    if seconds < 36_000:
        return "min", 60.0
    return "h", 3600.0
