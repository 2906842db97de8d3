"""``python -m trainprobe.jobs.processes.profiler_rules_process``: a job's profiler rules, in a
process.

::

    python -m trainprobe.jobs.processes.profiler_rules_process --runner-pid PID --heartbeat FILE
        [--resume] -- PROFILER_RULES_ARGUMENTS...

The job runner starts one for the profiler rules given at creation, and one more for those each
UpdateTrainingJob adds. It runs ``python -m trainprobe.rules.profiler_rules`` with the
arguments after ``--``, the way a job's rule process runs
(``trainprobe.jobs.processes.rule_process.follow_for_runner``): its rules stop (Stopped) on SIGTERM
and when the runner is gone, it beats its heartbeat, and a rule that ran out of memory ends in Error
saying so. With ``--resume`` its rules take up their runs where a process that held them (with
other rules) left them when it ended: windows it evaluated are evaluated again, not written again.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from trainprobe.config.errors import ConfigError
from trainprobe.jobs.processes.rule_process import StopWatch, follow_for_runner
from trainprobe.rules.profiler_rules.__main__ import conclude, runner_from_arguments

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, watch: StopWatch | None = None) -> int:
    """Run the profiler rules from the command line (stopped by ``watch`` when given, as in a
    Dask task); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m trainprobe.jobs.processes.profiler_rules_process"
    )
    parser.add_argument("--runner-pid", type=int, help="the job runner's process id")
    parser.add_argument("--heartbeat", help="the file to touch while the rules make progress")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="take up the rules' runs where the process that held them before left them",
    )
    parser.add_argument("rules_arguments", nargs=argparse.REMAINDER)
    arguments = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(name)s: %(message)s", level=logging.INFO)
    rest = list(arguments.rules_arguments)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    try:
        runner = runner_from_arguments(rest)
    except ConfigError as error:
        print(f"trainprobe profiler rules: {error}", file=sys.stderr)
        return 2
    if arguments.resume:
        runner.take_up()
    verdicts = follow_for_runner(
        runner, runner_pid=arguments.runner_pid, heartbeat_path=arguments.heartbeat, watch=watch
    )
    return conclude(runner, verdicts)


if __name__ == "__main__":
    sys.exit(main())
