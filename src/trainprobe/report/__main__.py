"""``python -m trainprobe.report PATH [--out DIR]``: write a job's profiler report.

The job runner runs it when a job ends, naming the ProfilerReport rule's output and, since a
job's layout may put them elsewhere, its ``--profiler-output`` and ``--debug-output``;
``trainprobe report`` is the same for users, and also takes a job's name. Prints the HTML
report's path; exits 2 for a path that is not a job's output.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from trainprobe.config.errors import ConfigError
from trainprobe.jobs.operations.describe import layout_at
from trainprobe.report.build import build_report
from trainprobe.report.job_files import JobFiles
from trainprobe.storage import files
from trainprobe.storage.job_layout import job_dir_of

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Build the report for command-line ``argv``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m trainprobe.report", description="Write a job's profiler report."
    )
    parser.add_argument("path", help="a job's directory, its profiler-output, or its rule output")
    parser.add_argument("--out", help="where to write the report (default: SageMaker's place)")
    parser.add_argument(
        "--profiler-output", help="the job's profiler output, when not under its directory"
    )
    parser.add_argument("--debug-output", help="the job's tensor output, likewise")
    arguments = parser.parse_args(argv)
    try:
        job = (
            JobFiles.find(arguments.path)
            if arguments.profiler_output is None
            else _elsewhere(arguments.path, arguments.profiler_output, arguments.debug_output)
        )
        report = build_report(job, arguments.out)
    except ConfigError as error:
        print(f"trainprobe report: {error}", file=sys.stderr)
        return 2
    print(report.html)
    return 0


def _elsewhere(rule_output: str, profiler_output: str, debug_output: str | None) -> JobFiles:
    """The job whose ProfilerReport rule writes to ``rule_output`` (``<job>/rule-output/<rule>``)
    and whose other outputs are where given."""
    found = job_dir_of(rule_output)
    if found is None or found[1] is None:
        raise ConfigError(
            "path", rule_output, "a ProfilerReport rule's output: <job>/rule-output/<rule>"
        )
    job_dir = found[0]
    return JobFiles.of(
        job_dir,
        files.absolute(profiler_output),
        files.absolute(debug_output or layout_at(job_dir).debug_output),
        rule_output=found[1],
    )


if __name__ == "__main__":
    sys.exit(main())
