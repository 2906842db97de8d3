"""``python -m trainprobe.rules.profiler_rules``: run profiler rules on a job as a process.

::

    python -m trainprobe.rules.profiler_rules PROFILER_OUTPUT --rule-output RULE_OUTPUT
        [--rule ProfilerReport] [--name NAME] [--param KEY=VALUE ...]
        [--request FILE] [--poll-interval S] [--no-data-timeout S] [--framework-wait S]
        [--no-framework-profiling]

By default it runs ProfilerReport with its defaults; ``--rule`` names another profiler rule,
``--param`` sets one of its parameters (``CPUBottleneck_threshold=20`` for ProfilerReport), and
``--request`` reads the rules from a JSON file: a CreateTrainingJob request (its
``ProfilerRuleConfigurations``) or a list of such entries. It follows the job until it ends
(``training_job_end.ts`` in the profiler output), prints each rule's verdict and recommendations,
and exits with 0 when no rule found an issue, 1 when one did, 2 for bad arguments or a rule that
ended in Error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.rules.profiler_rules.definition import ProfilerRuleDefinition
from trainprobe.rules.profiler_rules.evaluator import ProfilerRuleEvaluator
from trainprobe.rules.profiler_rules.runner import (
    DEFAULT_NO_DATA_TIMEOUT,
    DEFAULT_POLL_INTERVAL,
    ProfilerRuleRunner,
)
from trainprobe.rules.profiler_rules.trial import DEFAULT_FRAMEWORK_WAIT
from trainprobe.rules.verdict import ERROR, ISSUES_FOUND, NO_ISSUES_FOUND, Verdict

__all__ = ["conclude", "main", "runner_from_arguments"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainprobe.rules.profiler_rules",
        description="Evaluate profiler rules on a job's profiler output until the job ends.",
    )
    parser.add_argument("profiler_output", help="the job's profiler output directory")
    parser.add_argument("--rule-output", help="where each rule writes (<job>/rule-output)")
    parser.add_argument("--rule", default="ProfilerReport", help="a profiler rule's name")
    parser.add_argument("--name", help="the rule's configuration name (default: the rule's)")
    parser.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="a rule parameter"
    )
    parser.add_argument("--request", help="a JSON file with ProfilerRuleConfigurations")
    parser.add_argument("--poll-interval", type=float, default=DEFAULT_POLL_INTERVAL)
    parser.add_argument("--no-data-timeout", type=float, default=DEFAULT_NO_DATA_TIMEOUT)
    parser.add_argument("--framework-wait", type=float, default=DEFAULT_FRAMEWORK_WAIT)
    parser.add_argument(
        "--no-framework-profiling",
        action="store_true",
        help="the job records no framework events (no step timeline)",
    )
    return parser


def _definitions(arguments: argparse.Namespace) -> list[ProfilerRuleDefinition]:
    if arguments.request is not None:
        try:
            with open(arguments.request, encoding="utf-8") as file:
                request: Any = json.load(file)
        except (OSError, ValueError) as error:
            raise ConfigError(
                "--request", arguments.request, f"a readable JSON file ({error})"
            ) from None
        entries = (
            request.get("ProfilerRuleConfigurations") if isinstance(request, dict) else request
        )
        if not isinstance(entries, list):
            raise ConfigError(
                "--request",
                arguments.request,
                "a CreateTrainingJob request with ProfilerRuleConfigurations, or a list of them",
            )
        return [ProfilerRuleDefinition.from_request_dict(entry) for entry in entries]
    parameters = {}
    for item in arguments.param:
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise ConfigError("--param", item, "KEY=VALUE, such as threshold=20")
        parameters[key.strip()] = value.strip()
    return [ProfilerRuleDefinition.for_builtin(arguments.rule, parameters, name=arguments.name)]


def _print(evaluator: ProfilerRuleEvaluator) -> None:
    verdict = evaluator.verdict
    print(f"{verdict.name}: {verdict.status}")
    print(f"  {verdict.details}")
    if evaluator.rule is None:
        return
    for report in evaluator.rule.reports():
        if len(evaluator.rule.reports()) > 1 or report.rule != verdict.name:
            print(f"  {report.rule}: triggered in {report.rule_triggered} window(s)")
            print(f"    {report.recommendation}")


def runner_from_arguments(argv: Sequence[str] | None = None) -> ProfilerRuleRunner:
    """The runner command-line ``argv`` describes; ConfigError or ConfigErrors for bad ones."""
    arguments = _parser().parse_args(argv)
    return ProfilerRuleRunner(
        _definitions(arguments),
        arguments.profiler_output,
        rule_output_dir=arguments.rule_output,
        poll_interval=arguments.poll_interval,
        no_data_timeout=arguments.no_data_timeout,
        framework_wait=arguments.framework_wait,
        framework_profiling=not arguments.no_framework_profiling,
    )


def conclude(runner: ProfilerRuleRunner, verdicts: Sequence[Verdict]) -> int:
    """Print each rule's verdict; the exit status they call for (see the module docstring)."""
    for evaluator in runner.evaluators:
        _print(evaluator)
    statuses = {verdict.status for verdict in verdicts}
    if ERROR in statuses:
        return 2
    if ISSUES_FOUND in statuses:
        return 1
    return 0 if statuses <= {NO_ISSUES_FOUND} else 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rules with command-line ``argv``; returns the exit status."""
    try:
        runner = runner_from_arguments(argv)
    except ConfigError as error:
        print(f"trainprobe profiler rules: {error}", file=sys.stderr)
        return 2
    return conclude(runner, runner.run())


if __name__ == "__main__":
    sys.exit(main())
