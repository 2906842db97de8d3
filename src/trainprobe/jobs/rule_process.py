"""``python -m trainprobe.jobs.rule_process``: one rule evaluator of a job, in its own process.

The job runner starts one per debugging rule (SageMaker runs one processing job per rule). It
reads the rule's ``DebugRuleConfigurations`` entry from the job's launch plan, follows the job's
tensors with the rule engine, and writes ``rule-output/<RuleConfigurationName>/`` (its status
included). A rule that cannot even be built ends in Error there, with the reason.

It stops (status Stopped) on SIGTERM, and when the job runner is gone. A rule's StopTraining
action writes the stop request into the job's tensor output, as always, and also wakes the
runner (SIGUSR1), which stops the training at once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType

from trainprobe.capture.stop_request import StopRequest
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.rules import Rule
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.jobs.runner_watch import WAKE_SIGNAL, watch_runner
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.rules.verdict import ERROR
from trainprobe.smdebug_names import install as install_smdebug_names
from trainprobe.storage.rule_output import RuleOutputWriter, RuleStatus

__all__ = ["main"]

_NO_DATA_TIMEOUT = 10.0**9
"""The runner marks the training's end (even a crash's), so a rule waits for data that long."""


def _record_error(directory: str, name: str, details: str) -> None:
    writer = RuleOutputWriter(directory)
    writer.write_status(RuleStatus(name, ERROR, details, time.time(), finished=True))
    writer.close()


def _definition(entry: dict[str, object], working_dir: str) -> RuleDefinition:
    rule = Rule.from_request_dict(entry)
    definition = RuleDefinition.from_config(rule)
    source = definition.source
    if source is not None and "://" not in source and not os.path.isabs(source):
        # A relative rule file is relative to where the job was created.
        absolute = os.path.join(working_dir, os.path.expanduser(source))
        definition = RuleDefinition.for_custom(
            absolute,
            definition.rule_to_invoke,
            dict(definition.parameters),
            name=definition.name,
            actions=definition.actions,
        )
    return definition


def run(plan: LaunchPlan, index: int, runner_pid: int | None) -> int:
    """Evaluate debugging rule ``index`` of the job ``plan`` launches; the exit status."""
    layout = plan.layout
    entry = plan.debug_rules[index]
    name = str(entry.get("RuleConfigurationName", f"rule-{index}"))
    try:
        definition = _definition(entry, plan.rules_working_dir)
    except (ConfigError, ConfigErrors) as error:
        _record_error(layout.rule_output_dir(name), name, f"ConfigError: {error}")
        return 2

    def wake_runner(request: StopRequest) -> None:
        if runner_pid is not None:
            with contextlib.suppress(ProcessLookupError):  # the stop request is on disk anyway
                os.kill(runner_pid, WAKE_SIGNAL)

    runner = RuleRunner(
        definition,
        layout.debug_output,
        output_dir=layout.rule_output,
        no_data_timeout=_NO_DATA_TIMEOUT,
        on_stop_training=wake_runner,
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        runner.stop()

    signal.signal(signal.SIGTERM, stop)
    if runner_pid is not None:
        watch_runner(runner_pid, runner.stop)
    verdict = runner.run()[0]
    print(f"{verdict.name}: {verdict.status}: {verdict.details}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run one rule evaluator from the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m trainprobe.jobs.rule_process")
    parser.add_argument("--launch-file", required=True, help="the job's launch.json")
    parser.add_argument("--index", type=int, required=True, help="the rule's place in the job")
    parser.add_argument("--runner-pid", type=int, help="the job runner's process id")
    arguments = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(name)s: %(message)s", level=logging.INFO)
    install_smdebug_names(by="the job's rule process")
    with open(arguments.launch_file, encoding="utf-8") as file:
        plan = LaunchPlan.from_json(json.load(file))
    return run(plan, arguments.index, arguments.runner_pid)


if __name__ == "__main__":
    sys.exit(main())
