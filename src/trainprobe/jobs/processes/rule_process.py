"""``python -m trainprobe.jobs.processes.rule_process``: a rule evaluator of a job, in its own
process.

It evaluates the debugging rules ``--index`` names (one or several, each given once) from the
job's launch plan: the job runner starts one for the job's built-in rules together and one for
each custom rule (``trainprobe.jobs.runner.job_rules``). It follows the job's tensors with the rule
engine, reading each new step once for all its rules, and writes
``rule-output/<RuleConfigurationName>/`` for each (its status included). A rule that cannot even
be built, or that fails, ends in Error there, with the reason, while the others go on.

With ``--resume`` it takes up the runs of its rules where a process that held them (with other
rules) left them when it ended: each rule evaluates again what it had evaluated, to bring its
state back, and writes and acts only on what follows (``trainprobe.rules.rule_run``).

It stops (status Stopped) on SIGTERM, and when the job runner is gone. A rule's StopTraining
action writes the stop request into the job's tensor output, as always, and also wakes the
runner (SIGUSR1), which stops the training at once. While it follows the job it touches its
heartbeat file (``--heartbeat``), so the runner can tell a stuck rule from a slow one; a rule
that ran out of memory (the runner limits a rule process's memory) ends in Error saying so, and
when the hook stopped saving (a full disk), each rule's final status says up to which step it had
data.

``follow_for_runner`` is shared with the profiler rules' process
(``trainprobe.jobs.processes.profiler_rules_process``). Both ``main`` functions also run inside a
Dask task (``trainprobe.jobs.runner.dask_rule_executor``), where no signal reaches them: a
``StopWatch`` then takes the place of SIGTERM and of the runner's watch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import resource
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from trainprobe.config.actions import after_the_step
from trainprobe.config.errors import ConfigError
from trainprobe.config.rules import Rule
from trainprobe.config.statuses import UNFINISHED_RULE_STATUSES, RuleEvaluationStatus
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.jobs.operations.progress import latest_saved_step, saved_step_words
from trainprobe.jobs.processes.rule_heartbeat import Heartbeat
from trainprobe.jobs.processes.runner_watch import (
    WAKE_SIGNAL,
    end_within,
    process_exists,
    watch_runner,
)
from trainprobe.jobs.processes.signal_relay import relay_signals
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.following import RuleFollowing
from trainprobe.rules.runner import RuleRunner
from trainprobe.rules.verdict import Verdict
from trainprobe.smdebug_names import install as install_smdebug_names
from trainprobe.storage.hook_overhead import read_hook_overhead, saving_stopped_message
from trainprobe.storage.rule_output import RuleOutputWriter, RuleStatus
from trainprobe.storage.stop_request import StopRequest

__all__ = ["StopWatch", "follow_for_runner", "main"]

_OUT_OF_MEMORY = ("MemoryError", "can't allocate memory")

StopWatch = Callable[[Callable[[], None]], None]
"""Arranges for the function it is given (it stops the rules) to be called when they must stop."""

_RUNNER_GONE = "the job runner is gone"
"""Why a rule stopped when its runner ended before it (killed, crashed)."""

_NO_DATA_TIMEOUT = 10.0**9
"""The runner marks the training's end (even a crash's), so a rule waits for data that long."""


def _record_error(directory: str, name: str, details: str) -> None:
    writer = RuleOutputWriter(directory)
    writer.write_status(
        RuleStatus(name, RuleEvaluationStatus.ERROR, details, time.time(), finished=True)
    )
    writer.close()


def _memory_limit_mb() -> int | None:
    limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    return None if limit == resource.RLIM_INFINITY else limit // (1024 * 1024)


def _amend_finish(evaluator: Any, amend: Callable[[str, str], str]) -> None:
    """Make ``evaluator`` finish with its details passed through ``amend(status, details)``."""
    finish = evaluator.finish

    def finish_amended(status: str, details: str) -> None:
        finish(status, amend(status, details))

    evaluator.finish = finish_amended


def _memory_limit_reason(limit: int) -> Callable[[str, str], str]:
    """Say it plainly when a rule fails for want of memory: the rule process exceeded its
    memory limit (``RLIMIT_DATA``, which the job's runner sets)."""

    def amend(status: str, details: str) -> str:
        if status == RuleEvaluationStatus.ERROR and any(sign in details for sign in _OUT_OF_MEMORY):
            return f"the rule process exceeded its memory limit of {limit} MB ({details})"
        return details

    return amend


def _data_until(debug_output: str) -> Callable[[str, str], str]:
    """Say up to which step a rule had data when the hook stopped saving (a full disk)."""

    def amend(status: str, details: str) -> str:
        if status in UNFINISHED_RULE_STATUSES:
            return details
        try:
            stopped = saving_stopped_message(read_hook_overhead(debug_output))
        except OSError:
            return details
        if stopped is None:
            return details
        last = latest_saved_step(debug_output)
        had = "no data" if last is None else f"data up to {saved_step_words(debug_output, last)}"
        return f"{details} (the rule had {had}: {stopped})"

    return amend


def follow_for_runner(
    runner: RuleFollowing[Any],
    *,
    runner_pid: int | None,
    heartbeat_path: str | None,
    debug_output: str | None = None,
    watch: StopWatch | None = None,
) -> list[Verdict]:
    """Run ``runner``'s rules as a job's rule process: stop them on SIGTERM or when the job's
    runner is gone (or, given ``watch``, when it says), beat the heartbeat as they go, say when
    one ran out of memory, and, for rules on the tensors at ``debug_output``, up to which step
    they had data when the hook stopped saving. Their verdicts."""

    def stop_without_runner() -> None:
        runner.stop(_RUNNER_GONE)
        end_within(before=lambda: runner.finish_unfinished(_RUNNER_GONE))

    def stop_on_sigterm(signum: int) -> None:
        # The kernel sends SIGTERM when the runner dies (the parent-death signal): say so.
        if runner_pid is not None and not process_exists(runner_pid):
            stop_without_runner()
        else:
            runner.stop()

    if watch is not None:
        watch(runner.stop)
    else:
        relay_signals([signal.SIGTERM], stop_on_sigterm)
    limit = _memory_limit_mb()
    for evaluator in runner.evaluators:
        if limit is not None:
            _amend_finish(evaluator, _memory_limit_reason(limit))
        if debug_output is not None:
            _amend_finish(evaluator, _data_until(debug_output))
    if runner_pid is not None and watch is None:
        watch_runner(runner_pid, stop_without_runner)
    if heartbeat_path is not None:
        runner.on_progress = Heartbeat(heartbeat_path).beat
    try:
        return runner.run()
    except MemoryError as error:
        for evaluator in runner.evaluators:
            evaluator.finish(RuleEvaluationStatus.ERROR, f"MemoryError: {error}")
        return [evaluator.verdict for evaluator in runner.evaluators]


def _definition(entry: dict[str, object], working_dir: str) -> RuleDefinition:
    rule = Rule.from_request_dict(entry)
    # The hook carried out SkipStep and Rollback inside the training's step.
    definition = replace(RuleDefinition.from_config(rule), actions=after_the_step(rule.actions))
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


def run(
    plan: LaunchPlan,
    indexes: Sequence[int],
    runner_pid: int | None,
    heartbeat_path: str | None = None,
    watch: StopWatch | None = None,
    resume: bool = False,
) -> int:
    """Evaluate the debugging rules at ``indexes`` of the job ``plan`` launches (taking up their
    runs where an earlier process left them, when ``resume``); the exit status (2 when none of
    them could be configured)."""
    layout = plan.layout
    definitions = []
    for index in dict.fromkeys(indexes):
        entry = plan.debug_rules[index]
        name = str(entry.get("RuleConfigurationName", f"rule-{index}"))
        try:
            definitions.append(_definition(entry, plan.rules_working_dir))
        except ConfigError as error:
            _record_error(layout.rule_output_dir(name), name, f"ConfigError: {error}")
    if not definitions:
        return 2

    def wake_runner(request: StopRequest) -> None:
        if runner_pid is not None:
            with contextlib.suppress(ProcessLookupError):  # the stop request is on disk anyway
                os.kill(runner_pid, WAKE_SIGNAL)

    runner = RuleRunner(
        definitions,
        layout.debug_output,
        output_dir=layout.rule_output,
        no_data_timeout=_NO_DATA_TIMEOUT,
        on_stop_training=wake_runner,
    )
    if resume:
        runner.take_up()
    verdicts = follow_for_runner(
        runner,
        runner_pid=runner_pid,
        heartbeat_path=heartbeat_path,
        debug_output=layout.debug_output,
        watch=watch,
    )
    for verdict in verdicts:
        print(f"{verdict.name}: {verdict.status}: {verdict.details}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None, watch: StopWatch | None = None) -> int:
    """Run one rule evaluator from the command line (stopped by ``watch`` when given); returns
    the exit status."""
    parser = argparse.ArgumentParser(prog="python -m trainprobe.jobs.processes.rule_process")
    parser.add_argument("--launch-file", required=True, help="the job's launch.json")
    parser.add_argument(
        "--index",
        type=int,
        action="append",
        required=True,
        help="a rule's place in the job (once per rule this process evaluates)",
    )
    parser.add_argument("--runner-pid", type=int, help="the job runner's process id")
    parser.add_argument("--heartbeat", help="the file to touch while the rule makes progress")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="take up the rules' runs where the process that held them before left them",
    )
    arguments = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(name)s: %(message)s", level=logging.INFO)
    install_smdebug_names(by="the job's rule process")
    with open(arguments.launch_file, encoding="utf-8") as file:
        plan = LaunchPlan.from_json(json.load(file))
    return run(
        plan,
        arguments.index,
        arguments.runner_pid,
        arguments.heartbeat,
        watch,
        resume=arguments.resume,
    )


if __name__ == "__main__":
    sys.exit(main())
