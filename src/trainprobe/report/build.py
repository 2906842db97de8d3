"""``build_report``: write a job's profiler report, ``profiler-report.html`` and
``profiler-report.json``, where SageMaker puts it (``job_files``).

Both files appear atomically, so a reader of a job in progress sees the previous report or the
new one. When no profiler rule has reported on a finished job, ProfilerReport runs on its data
first, so that the report has the rules' findings (on a job in progress the rules section says
how to run them).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from trainprobe.report.content import report_content
from trainprobe.report.job_files import JobFiles
from trainprobe.report.page import render_page
from trainprobe.rules.profiler_rules.definition import ProfilerRuleDefinition
from trainprobe.rules.profiler_rules.report_data import json_safe
from trainprobe.rules.profiler_rules.runner import run_profiler_rules
from trainprobe.storage import files
from trainprobe.storage.job_layout import (
    PROFILER_REPORT_HTML,
    PROFILER_REPORT_JSON,
    PROFILER_REPORT_RULE,
    RULE_OUTPUT,
)

__all__ = ["HTML_FILE", "JSON_FILE", "ReportFiles", "build_report"]

HTML_FILE = PROFILER_REPORT_HTML
JSON_FILE = PROFILER_REPORT_JSON


@dataclass(frozen=True)
class ReportFiles:
    """The files of one report."""

    html: str
    json: str

    @classmethod
    def write(
        cls, directory: str, names: tuple[str, str], content: object, page: str
    ) -> ReportFiles:
        """Write a report's ``page`` and its ``content`` as JSON into ``directory``, under
        ``names`` (the page's, the JSON's); the page first, so a reader that finds the JSON
        finds the page of the same content."""
        report = cls(html=os.path.join(directory, names[0]), json=os.path.join(directory, names[1]))
        data = json.dumps(content, allow_nan=False, separators=(",", ":")) + "\n"
        files.write_atomic(report.html, page.encode())
        files.write_atomic(report.json, data.encode())
        return report


def build_report(
    job: JobFiles | str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None
) -> ReportFiles:
    """Write the report of ``job`` (its files, or a path that ``JobFiles.find`` takes) into
    ``out_dir`` (default: the ProfilerReport rule's ``profiler-output``); say where it is."""
    if not isinstance(job, JobFiles):
        job = JobFiles.find(job)
    if job.rule_output is None and job.ended:
        job = _with_profiler_rules(job)
    content = report_content(job)
    data = json_safe(content.to_json())
    directory = os.fspath(out_dir) if out_dir is not None else job.report_dir()
    return ReportFiles.write(directory, (HTML_FILE, JSON_FILE), data, render_page(content, data))


def _with_profiler_rules(job: JobFiles) -> JobFiles:
    """Run ProfilerReport over the finished job's data, into its rule output."""
    definition = ProfilerRuleDefinition.for_builtin(
        PROFILER_REPORT_RULE, {}, name=PROFILER_REPORT_RULE
    )
    run_profiler_rules([definition], job.profiler_output, os.path.join(job.job_dir, RULE_OUTPUT))
    return JobFiles.of(job.job_dir, job.profiler_output, job.debug_output)
