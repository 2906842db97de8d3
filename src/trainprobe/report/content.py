"""Everything a profiler report says about one job, as one JSON-ready dictionary.

``profiler-report.json`` is this dictionary; ``profiler-report.html`` renders it. Sections:

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
from typing import Any

from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.report.debugging_rules import debugging_rules
from trainprobe.report.flight_recorder import flight_recorder
from trainprobe.report.framework import framework_summary
from trainprobe.report.job_files import JobFiles
from trainprobe.report.job_summary import job_summary, time_axis
from trainprobe.report.overhead import debugger_overhead
from trainprobe.report.rules_summary import read_rule_reports, rules_summary
from trainprobe.report.step_durations import step_durations
from trainprobe.report.system_usage import system_usage
from trainprobe.report.training_record import training_record
from trainprobe.storage.metric_series import read_metric_series

__all__ = ["FORMAT", "report_content"]

FORMAT = "trainprobe-profiler-report/1"
DEFAULT_STDDEV = 3.0
"""StepOutlier's default ``stddev``, for a job on which the rule did not run."""


def report_content(job: JobFiles) -> dict[str, Any]:
    """The report of ``job``, from its files as they are now."""
    output = ProfilerOutput(job.profiler_output)
    series = read_metric_series(job.profiler_output)
    spans = output.steps().spans()
    reports = read_rule_reports(job.rule_reports_dir)
    summary = job_summary(job.name, job.ended, series, spans)
    unit, seconds_per_unit = time_axis(summary["TotalSeconds"])
    start = summary["Start"] or 0.0
    return {
        "Format": FORMAT,
        "GeneratedAt": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "JobDirectory": job.job_dir,
        "Job": summary,
        "TimeAxis": {"Unit": unit, "SecondsPerUnit": seconds_per_unit, "Start": start},
        "TrainingRecord": training_record(job.debug_output),
        "SystemUsage": system_usage(series, start, seconds_per_unit),
        "StepDurations": step_durations(spans, _stddev(reports)),
        "Framework": framework_summary(
            output, reports.get("OverallFrameworkMetrics", {}).get("Details")
        ),
        "Rules": rules_summary(reports, job.rule_output),
        "DebuggingRules": debugging_rules(job.job_dir, job.debug_output, job.rule_output),
        "DebuggerOverhead": debugger_overhead(job.debug_output, summary["TrainingSeconds"]),
        "FlightRecorder": flight_recorder(job.profiler_output),
    }


def _stddev(reports: dict[str, dict[str, Any]]) -> float:
    value = (reports.get("StepOutlier", {}).get("Parameters") or {}).get("stddev")
    return float(value) if isinstance(value, numbers.Real) else DEFAULT_STDDEV
