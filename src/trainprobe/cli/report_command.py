"""``trainprobe report JOB_OR_PATH [--out DIR]``: write a job's profiler report (and, for an
XGBoost job, its XGBoost training report, where CreateXgboostReport writes it).

JOB_OR_PATH is a job's name (from the job store) or a directory: a job's output, its
profiler-output, or a ProfilerReport rule's output. The report is built from what is on disk
now, so it works on a job in progress as on a finished one; it goes beside the ProfilerReport
rule's data (SageMaker's place) unless --out says otherwise.
"""

from __future__ import annotations

import argparse
import sys

from trainprobe.config.errors import ConfigError
from trainprobe.report import JobFiles, build_report
from trainprobe.report.xgboost import RULE_NAME, build_xgboost_report, is_xgboost_output
from trainprobe.storage.job_layout import rule_output_dir

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    """Build the report and print where it is."""
    try:
        job = JobFiles.find(args.job_or_path)
        report = build_report(job, args.out)
        xgboost = None
        if is_xgboost_output(job.debug_output):
            rule_output = rule_output_dir(job.job_dir, RULE_NAME)
            xgboost = build_xgboost_report(job.debug_output, rule_output, out_dir=args.out)
    except ConfigError as error:
        print(f"trainprobe report: {error}", file=sys.stderr)
        return 2
    print(f"report: {report.html}")
    print(f"data:   {report.json}")
    if xgboost is not None:
        print(f"XGBoost report: {xgboost.html}")
        print(f"XGBoost data:   {xgboost.json}")
    return 0


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report`` to the command line."""
    parser = subcommands.add_parser(
        "report",
        help="write a job's profiler report (HTML and JSON)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("job_or_path", metavar="JOB_OR_PATH", help="a job's name or directory")
    parser.add_argument("--out", help="the directory to write the report into")
    parser.set_defaults(run=run)
