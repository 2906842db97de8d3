"""Everything a profiler report says about one job, as one record of typed sections.

``profiler-report.json`` is its ``to_json()``; ``profiler-report.html`` renders it. Sections:

- ``Job``: the training job summary (``job_summary``);
- ``TrainingRecord``: every TRAIN step's loss, learning rate and gradient norm
  (``training_record``);
- ``SystemUsage``: each host's metrics over time and their statistics (``system_usage``);
- ``StepDurations``: each training process's steps (``step_durations``);
- ``Framework``: where the time went (``framework``);
- ``Rules``: the profiler rules' findings (``rules_summary``);
- ``DebuggingRules``: each debugging rule's verdict and where a NaN started (``debugging_rules``);
- ``DebuggerOverhead``: what the hook cost (``overhead``);
- ``FlightRecorder``: the steps the flight recorder captured, and why (``flight_recorder``).

It reads whatever is on disk now, so it works on a job in progress as on a finished one.
"""

from __future__ import annotations

import datetime
import numbers
from dataclasses import dataclass
from typing import Any

from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.report.debugging_rules import DebuggingRules, debugging_rules
from trainprobe.report.flight_recorder import FlightRecorderSection, flight_recorder
from trainprobe.report.framework import FrameworkSummary, framework_summary
from trainprobe.report.job_files import JobFiles
from trainprobe.report.job_summary import JobSummary, TimeAxis, job_summary, time_axis
from trainprobe.report.overhead import DebuggerOverhead, debugger_overhead
from trainprobe.report.records import Record
from trainprobe.report.rules_summary import RulesSummary, read_rule_reports, rules_summary
from trainprobe.report.step_durations import StepDurations, step_durations
from trainprobe.report.system_usage import SystemUsage, system_usage
from trainprobe.report.training_record import TrainingRecordSection, training_record
from trainprobe.storage.metric_series import read_metric_series

__all__ = ["FORMAT", "ReportContent", "report_content"]

FORMAT = "trainprobe-profiler-report/1"
DEFAULT_STDDEV = 3.0
"""StepOutlier's default ``stddev``, for a job on which the rule did not run."""


@dataclass(frozen=True)
class ReportContent(Record):
    """A report: its format, when and of which job directory it was made, and its sections."""

    format: str
    generated_at: str
    job_directory: str
    job: JobSummary
    time_axis: TimeAxis
    training_record: TrainingRecordSection
    system_usage: SystemUsage
    step_durations: StepDurations
    framework: FrameworkSummary
    rules: RulesSummary
    debugging_rules: DebuggingRules
    debugger_overhead: DebuggerOverhead
    flight_recorder: FlightRecorderSection


def report_content(job: JobFiles) -> ReportContent:
    """The report of ``job``, from its files as they are now."""
    output = ProfilerOutput(job.profiler_output)
    series = read_metric_series(job.profiler_output)
    spans = output.steps().spans()
    reports = read_rule_reports(job.rule_reports_dir)
    summary = job_summary(job.name, job.ended, series, spans)
    axis = time_axis(summary)
    overall = reports.get("OverallFrameworkMetrics", {}).get("Details")
    return ReportContent(
        format=FORMAT,
        generated_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        job_directory=job.job_dir,
        job=summary,
        time_axis=axis,
        training_record=training_record(job.debug_output),
        system_usage=system_usage(series, axis.start, axis.seconds_per_unit),
        step_durations=step_durations(spans, _stddev(reports)),
        framework=framework_summary(output, overall),
        rules=rules_summary(reports, job.rule_output),
        debugging_rules=debugging_rules(job.job_dir, job.debug_output, job.rule_output),
        debugger_overhead=debugger_overhead(job.debug_output, summary.training_seconds),
        flight_recorder=flight_recorder(job.profiler_output),
    )


def _stddev(reports: dict[str, dict[str, Any]]) -> float:
    value = (reports.get("StepOutlier", {}).get("Parameters") or {}).get("stddev")
    return float(value) if isinstance(value, numbers.Real) else DEFAULT_STDDEV
