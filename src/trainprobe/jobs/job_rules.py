"""The rule evaluators of one job, as its runner keeps them: started, watched, stopped.

One evaluator for the built-in debugging rules together and one per custom rule
(``trainprobe.jobs.rule_process``, ``debugging_evaluators``), and one for the profiler rules given
at creation, plus one per UpdateTrainingJob that adds some
(``trainprobe.jobs.profiler_rules_process``; each reads the profiler data from the job's
beginning, so the rules judge the whole job). They run through a ``RuleExecutor``
(``trainprobe.jobs.rule_executor``). ``check()``, called every tick, finds an evaluator that has
ended (killed, out of memory, crashed, or stuck and ended for it) and records the rules it left
unfinished as Error with the true reason, while the training and the other rules go on.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.config.rules import Rule
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.jobs.rule_executor import RuleExecution, RuleExecutor, RuleLaunch
from trainprobe.jobs.rule_statuses import record_unfinished_rules, rule_names

__all__ = ["BUILTIN_RULES_EVALUATOR", "JobRules", "debugging_evaluators", "rule_log"]

BUILTIN_RULES_EVALUATOR = "builtin-rules"
"""The label (and log and heartbeat name) of the evaluator of a job's built-in debugging rules."""

log = logging.getLogger("trainprobe.jobs.runner")


class JobRules:
    """The rule evaluators of the job ``plan`` launches, run by ``executor``; ``runner_pid``
    is the job runner's process, which they watch."""

    def __init__(self, plan: LaunchPlan, executor: RuleExecutor, runner_pid: int) -> None:
        self.plan = plan
        self.layout = plan.layout
        self.executor = executor
        self.runner_pid = runner_pid
        self.executions: list[RuleExecution] = []
        self._settled: set[int] = set()
        self.profiler_rules_started: set[str] = set()
        """The profiler rules an evaluator was started for (or could not be)."""
        self._updates = 0

    # ----- starting -----------------------------------------------------------------------

    def start_debugging_rules(self) -> None:
        """Start the evaluators of the job's debugging rules (see ``debugging_evaluators``)."""
        for label, indexes in debugging_evaluators(self.plan.debug_rules):
            heartbeat = self.layout.rule_heartbeat(label)
            command = [
                self.plan.python,
                "-m",
                "trainprobe.jobs.rule_process",
                "--launch-file",
                self.layout.launch_file,
                "--runner-pid",
                str(self.runner_pid),
                "--heartbeat",
                heartbeat,
            ]
            for index in indexes:
                command += ["--index", str(index)]
            names = tuple(rule_names(self.plan.debug_rules[index] for index in indexes))
            self._start(
                RuleLaunch(
                    f"rule {label}" if label in names else "built-in rules",
                    names,
                    tuple(command),
                    self.plan.rules_working_dir,
                    self.layout.rule_log(label),
                    heartbeat,
                )
            )
        if self.plan.debug_rules:
            log.info("started the evaluators of %d rule(s)", len(self.plan.debug_rules))

    def start_profiler_rules(
        self,
        entries: list[dict[str, Any]],
        profiler_config: Mapping[str, Any] | None,
        *,
        added: bool,
    ) -> None:
        """Start one evaluator for those of ``entries`` (ProfilerRuleConfigurations) that none
        evaluates yet; ``added`` says they come from an UpdateTrainingJob."""
        entries = [
            entry
            for entry in entries
            if str(entry.get("RuleConfigurationName")) not in self.profiler_rules_started
        ]
        if not entries:
            return
        names = tuple(rule_names(entries))
        self.profiler_rules_started.update(names)
        suffix = ""
        if added:
            self._updates += 1
            suffix = f"-added-{self._updates}"
        label = f"profiler-rules{suffix}"
        request_file = os.path.join(self.layout.config_dir, f"profilerrules{suffix}.json")
        with open(request_file, "w", encoding="utf-8") as file:
            json.dump(entries, file)
        heartbeat = self.layout.rule_heartbeat(label)
        command = [
            self.plan.python,
            "-m",
            "trainprobe.jobs.profiler_rules_process",
            "--runner-pid",
            str(self.runner_pid),
            "--heartbeat",
            heartbeat,
            "--",
            self.layout.profiler_output,
            "--rule-output",
            self.layout.rule_output,
            "--request",
            request_file,
        ]
        if not _framework_profiling(profiler_config):
            # The step timeline will never come: rules that need it say so instead of waiting.
            command.append("--no-framework-profiling")
        launch = RuleLaunch(
            label,
            names,
            tuple(command),
            self.layout.job_dir,
            self.layout.rule_log(label),
            heartbeat,
        )
        if self._start(launch) and added:
            log.info("started the profiler rules added by UpdateTrainingJob: %s", ", ".join(names))

    def _start(self, launch: RuleLaunch) -> bool:
        try:
            self.executions.append(self.executor.start(launch))
        except OSError as error:
            # Rules that cannot start must not end the job: they end in Error, saying why.
            log.exception("could not start the %s", launch.label)
            record_unfinished_rules(
                self.layout,
                launch.rule_names,
                f"the rule evaluator could not be started: {error}",
            )
            return False
        return True

    # ----- watching and ending ------------------------------------------------------------

    def check(self) -> None:
        """Record the rules of every evaluator that has ended since the last look and left
        them unfinished as Error, saying how it ended."""
        for execution in self.executions:
            if id(execution) in self._settled:
                continue
            ending = execution.poll()
            if ending is None:
                continue
            self._settled.add(id(execution))
            recorded = record_unfinished_rules(self.layout, execution.launch.rule_names, ending)
            if recorded:
                log.warning("%s: %s", ", ".join(recorded), ending)

    def running(self) -> bool:
        """Whether any evaluator still runs."""
        self.check()
        return any(id(execution) not in self._settled for execution in self.executions)

    def stop(self, grace_seconds: float, why: str) -> None:
        """Stop every evaluator still running: their rules end Stopped; one that does not stop
        within ``grace_seconds`` is killed, and its unfinished rules end in Error, saying
        ``why`` it was stopped."""
        for execution in self.executions:
            if id(execution) in self._settled or execution.poll() is not None:
                continue
            execution.stop(grace_seconds)
            self._settled.add(id(execution))
            reason = f"the rule was stopped before it finished: {why}"
            record_unfinished_rules(self.layout, execution.launch.rule_names, reason)
        self.check()


def _framework_profiling(profiler_config: Mapping[str, Any] | None) -> bool:
    """Whether the job's ProfilerConfig (the one in force) turns the framework profiler, and so
    its step timeline, on."""
    if profiler_config is None:
        return False
    return "ProfilingParameters" in profiler_config and not profiler_config.get(
        "DisableProfiler", False
    )


def debugging_evaluators(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[int]]]:
    """How a job's debugging rules (its DebugRuleConfigurations ``entries``) are spread over
    evaluator processes: (label, the rules' places in ``entries``) for each; the label names the
    process's log and heartbeat.

    The built-in rules share one (``BUILTIN_RULES_EVALUATOR``, unless a rule has that name): they
    read the same tensors at the same steps, and one process reads each new step once for all
    of them, where a process per rule would each list and read it again; a built-in rule that
    fails still ends in Error alone, and the others go on. Each custom rule (the user's code,
    which may hang, crash its process or hold its memory) has a process of its own, labelled
    with its name, as has an entry that cannot be read (its process records why).
    """
    shared: list[int] = []
    evaluators: list[tuple[str, list[int]]] = []
    for index, entry in enumerate(entries):
        if _is_builtin(entry):
            shared.append(index)
        else:
            evaluators.append((str(entry.get("RuleConfigurationName")), [index]))
    if shared:
        label = BUILTIN_RULES_EVALUATOR
        while label in rule_names(entries):  # a custom rule of that name keeps its own files
            label += "-"
        evaluators.insert(0, (label, shared))
    return evaluators


def rule_log(plan: LaunchPlan, rule_name: str) -> str:
    """The log of the process that evaluates the rule ``rule_name`` of the job ``plan``
    launches (the rule's own name for a rule that is not one of its debugging rules)."""
    for label, indexes in debugging_evaluators(plan.debug_rules):
        names = rule_names(plan.debug_rules[index] for index in indexes)
        if rule_name in names:
            return plan.layout.rule_log(label)
    return plan.layout.rule_log(rule_name)


def _is_builtin(entry: Mapping[str, Any]) -> bool:
    try:
        return Rule.from_request_dict(entry).spec is not None
    except ConfigError:
        return False
