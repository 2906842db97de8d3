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
from trainprobe.jobs.layout import DEBUG_OUTPUT, PROFILER_OUTPUT, RULE_OUTPUT
from trainprobe.rules.profiler.evaluator import REPORTS_DIR
from trainprobe.storage import files
from trainprobe.storage.training_end import training_has_ended

__all__ = ["DEFAULT_RULE_NAME", "REPORT_DIR", "JobFiles"]

REPORT_DIR = "profiler-output"
"""Under a ProfilerReport rule's output: where the report and its rules' data go."""
DEFAULT_RULE_NAME = "ProfilerReport"


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
        return os.path.join(self.rule_output, REPORTS_DIR)

    def report_dir(self) -> str:
        """Where the report goes: the ProfilerReport rule's output, or a new one."""
        rule_output = self.rule_output or os.path.join(self.job_dir, RULE_OUTPUT, DEFAULT_RULE_NAME)
        return os.path.join(rule_output, REPORT_DIR)

    @classmethod
    def find(cls, path: str | os.PathLike[str]) -> JobFiles:
        """The job at ``path``: a job directory, its profiler output, or the output of its
        ProfilerReport rule. A path that is none of these is a ConfigError."""
        path = os.path.abspath(os.fspath(path))
        if not os.path.isdir(path):
            raise ConfigError("path", path, "an existing directory: a job's output")
        parent = os.path.dirname(path)
        job_dir, rule_output = None, None
        if os.path.isdir(os.path.join(path, PROFILER_OUTPUT)):
            job_dir = path
        elif os.path.basename(path) == PROFILER_OUTPUT:
            job_dir = parent
        elif os.path.basename(parent) == RULE_OUTPUT:
            job_dir, rule_output = os.path.dirname(parent), path
        if job_dir is None or not os.path.isdir(os.path.join(job_dir, PROFILER_OUTPUT)):
            raise ConfigError(
                "path",
                path,
                "a job's directory (with profiler-output/), its profiler-output directory, or "
                "a ProfilerReport rule's output under its rule-output/",
            )
        return cls.of(
            job_dir,
            os.path.join(job_dir, PROFILER_OUTPUT),
            os.path.join(job_dir, DEBUG_OUTPUT),
            rule_output=rule_output,
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
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        reports = os.path.join(root, name, REPORTS_DIR)
        if files.is_dir(reports) and len(files.list_files(reports, ".json")) > 1:
            found.append((os.path.getmtime(reports), os.path.join(root, name)))
    return max(found)[1] if found else None
