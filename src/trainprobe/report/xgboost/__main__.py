"""``python -m trainprobe.report.xgboost RULE_OUTPUT --debug-output DIR``: write the XGBoost report.

The job runner runs it when a job with a CreateXgboostReport rule ends, once the other rules
have given their verdicts, naming the rule's output (``<job>/rule-output/<rule>``) and the
job's tensor output. Prints the HTML report's path; exits 2 when there is nothing to report on.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from trainprobe.config.errors import ConfigError
from trainprobe.report.xgboost.build import build_xgboost_report
from trainprobe.storage import files
from trainprobe.storage.job_layout import DEBUG_OUTPUT

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Build the report for command-line ``argv``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m trainprobe.report.xgboost", description="Write an XGBoost job's report."
    )
    parser.add_argument("rule_output", help="the CreateXgboostReport rule's output directory")
    parser.add_argument(
        "--debug-output", help="the job's tensor output (default: <job>/debug-output)"
    )
    parser.add_argument("--out", help="where to write the report (default: the rule's output)")
    arguments = parser.parse_args(argv)
    rule_output = files.absolute(arguments.rule_output)
    job_dir = os.path.dirname(os.path.dirname(rule_output))
    debug_output = arguments.debug_output or os.path.join(job_dir, DEBUG_OUTPUT)
    try:
        report = build_xgboost_report(debug_output, rule_output, out_dir=arguments.out)
    except ConfigError as error:
        print(f"trainprobe report: {error}", file=sys.stderr)
        return 2
    print(report.html)
    return 0


if __name__ == "__main__":
    sys.exit(main())
