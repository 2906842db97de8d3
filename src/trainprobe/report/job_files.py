"""Which job a report is about, and where its parts are, from whatever path the user gives.

A job's directory has SageMaker's layout (``debug-output/``, ``profiler-output/``,
``rule-output/<rule>/``); ``trainprobe report`` also takes the profiler output directory itself,
or a ProfilerReport rule's output directory. The report goes where SageMaker puts it:
``rule-output/<ProfilerReport rule>/profiler-output/``, beside the rules' report data
(``profiler-reports/<Rule>.json``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from trainprobe.config.errors import ConfigError
from trainprobe.jobs.operations.locate import locate_job
from trainprobe.jobs.store import JobStore
from trainprobe.storage import files
from trainprobe.storage.job_layout import (
    PROFILER_REPORT_RULE,
    RULE_OUTPUT,
    RULE_REPORT_DIR,
    RULE_REPORTS_DIR,
    job_dir_of,
    rule_output_dir,
)
from trainprobe.storage.training_end import training_has_ended

__all__ = ["JobFiles"]


@dataclass(frozen=True)
class JobFiles:
    """The parts of one job's output that the report reads, and where it writes."""

    job_dir: str
    profiler_output: str
    debug_output: str
    rule_output: str | None
    """The ProfilerReport rule's output directory, when that rule ran (or runs) on the job."""

    @property
    def name(self) -> str:
        """The job's name: its directory's."""
        return os.path.basename(self.job_dir.rstrip("/")) or self.job_dir

    @property
    def ended(self) -> bool:
        """Whether the job has ended (its profiler output is marked finished)."""
        return training_has_ended(self.profiler_output)

    @property
    def rule_reports_dir(self) -> str | None:
        """Where the profiler rules' report data is, if a ProfilerReport rule wrote any."""
        if self.rule_output is None:
            return None
        return os.path.join(self.rule_output, RULE_REPORTS_DIR)

    def report_dir(self) -> str:
        """Where the report goes: the ProfilerReport rule's output, or a new one."""
        rule_output = self.rule_output or rule_output_dir(self.job_dir, PROFILER_REPORT_RULE)
        return os.path.join(rule_output, RULE_REPORT_DIR)

    @classmethod
    def find(cls, name_or_path: str | os.PathLike[str], store: JobStore | None = None) -> JobFiles:
        """The job that ``name_or_path`` names (see ``jobs.operations.locate.locate_job``): a job's
        name, its directory, its profiler output, or the output of its ProfilerReport rule. A path
        that is none of these, or a job with no profiler output, is a ConfigError."""
        text = os.fspath(name_or_path)
        layout = locate_job(text, store)
        if not files.is_dir(layout.profiler_output):
            raise ConfigError(
                "path", text, f"a job with profiler output ({layout.profiler_output} is missing)"
            )
        found = job_dir_of(text) if files.exists(text) else None
        return cls.of(
            layout.output_dir,
            layout.profiler_output,
            layout.debug_output,
            rule_output=found[1] if found is not None else None,
        )

    @classmethod
    def of(
        cls,
        job_dir: str,
        profiler_output: str,
        debug_output: str,
        *,
        rule_output: str | None = None,
    ) -> JobFiles:
        """A job whose outputs are where given (a job runner's layout may put the profiler
        and debug outputs under other roots); its ProfilerReport output is found."""
        return cls(
            job_dir=job_dir,
            profiler_output=profiler_output,
            debug_output=debug_output,
            rule_output=rule_output or _profiler_report_output(job_dir),
        )


def _profiler_report_output(job_dir: str) -> str | None:
    """The newest rule output under the job that holds profiler rules' report data."""
    root = os.path.join(job_dir, RULE_OUTPUT)
    found = []
    for name in files.child_names(root):
        reports = os.path.join(root, name, RULE_REPORTS_DIR)
        if files.is_dir(reports) and len(files.list_files(reports, ".json")) > 1:
            found.append((files.modified_time(reports), os.path.join(root, name)))
    return max(found)[1] if found else None
