"""The report's training job summary: how long the job spent starting, training and ending.

Initialisation runs from the job's first data (a system reading or a framework event) to the
start of its first step, training from there to the end of its last step, finalisation from
there to the job's last data: the phases SageMaker's report names, measured the same way as
MaxInitializationTime measures them.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field

from trainprobe.analysis.profiling_data.steps import StepSpan
from trainprobe.config.statuses import TrainingJobStatus
from trainprobe.report.records import Record, json_key
from trainprobe.storage.metric_series import MetricSeries

__all__ = ["JobSummary", "TimeAxis", "job_summary", "time_axis"]


@dataclass(frozen=True)
class JobSummary(Record):
    """The section: times in seconds since the epoch (and ISO 8601 in UTC), ``status``
    ``Ended`` or ``InProgress``."""

    name: str
    status: str
    start: float | None
    end: float | None
    start_time: str | None
    end_time: str | None
    first_step_start: float | None
    last_step_end: float | None
    initialization_seconds: float | None
    training_seconds: float | None
    finalization_seconds: float | None
    total_seconds: float | None
    steps: int
    steps_per_second: float | None
    hosts: list[str]
    training_processes: list[str]
    gpus: int = field(metadata=json_key("GPUs"))

    @property
    def ended(self) -> bool:
        """Whether the job had ended when the report was made."""
        return self.status == "Ended"


@dataclass(frozen=True)
class TimeAxis(Record):
    """The report's time axes: their ``unit``, its seconds, and the job's start (time 0)."""

    unit: str
    seconds_per_unit: float
    start: float


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
) -> JobSummary:
    """The section's content."""
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
    return JobSummary(
        name=name,
        status="Ended" if ended else TrainingJobStatus.IN_PROGRESS,
        start=start,
        end=end,
        start_time=_iso(start),
        end_time=_iso(end),
        first_step_start=first_step_s,
        last_step_end=last_step_s,
        initialization_seconds=_between(start, first_step_s),
        training_seconds=training_s,
        finalization_seconds=_between(last_step_s, end) if ended else None,
        total_seconds=_between(start, end),
        steps=steps,
        steps_per_second=steps / training_s if training_s else None,
        hosts=sorted({found.node_id for found in series}),
        training_processes=sorted({span.node_id for span in spans}),
        gpus=len({(found.node_id, found.key.name) for found in series if found.key.type == "gpu"}),
    )


def _between(first: float | None, last: float | None) -> float | None:
    return None if first is None or last is None else max(0.0, last - first)


def time_axis(summary: JobSummary) -> TimeAxis:
    """The report's time axes for the job ``summary`` sums up: seconds, minutes or hours, by
    its length."""
    seconds = summary.total_seconds or 0.0
    start = summary.start or 0.0
    if seconds < 600:
        return TimeAxis("s", 1.0, start)
    if seconds < 36_000:
        return TimeAxis("min", 60.0, start)
    return TimeAxis("h", 3600.0, start)
