"""The rule evaluators of one job, as its runner keeps them: started, watched, stopped.

One evaluator for the built-in debugging rules together and one per custom rule
(``trainprobe.jobs.processes.rule_process``, ``debugging_evaluators``), and one for the profiler
rules given at creation, plus one per UpdateTrainingJob that adds some
(``trainprobe.jobs.processes.profiler_rules_process``; each reads the profiler data from the job's
beginning, so the rules judge the whole job). They run through a ``RuleExecutor``
(``trainprobe.jobs.runner.rule_executor``). ``check()``, called every tick, finds an evaluator that
has ended (killed, out of memory, crashed, or stuck and ended for it) with rules unfinished:

- an evaluator of several rules (the built-in ones, the profiler rules) takes one rule's fault
  down with the others, so each rule it left unfinished is taken up at once in an evaluator of
  its own (``--resume``: from its last evaluated step, its state brought back), as SageMaker runs
  each rule in a container of its own;
- an evaluator of one rule (a custom rule, or one taken up alone) that ends so has found its
  cause: the rule ends in Error with the true reason (a signal, the memory limit, no progress).

The training and the other rules go on meanwhile.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from trainprobe.config.errors import ConfigError
from trainprobe.config.rules import Rule
from trainprobe.config.statuses import RuleEvaluationStatus
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.jobs.operations.rule_statuses import (
    record_unfinished_rules,
    rule_names,
    unfinished_rules,
)
from trainprobe.jobs.runner.rule_executor import RuleExecution, RuleExecutor, RuleLaunch

__all__ = [
    "BUILTIN_RULES_EVALUATOR",
    "DebuggingEvaluator",
    "JobRules",
    "debugging_evaluators",
    "rule_log",
]

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
        self._labels: set[str] = set()
        self._apart: dict[int, Callable[[str], RuleLaunch]] = {}
        """How each rule of an evaluator of several starts alone, by the evaluator's id."""
        self._taken_up: dict[int, str] = {}
        """How the shared evaluator ended, by the id of the evaluator that took a rule up."""
        self._stopping = False

    # ----- starting -----------------------------------------------------------------------

    def start_debugging_rules(self) -> None:
        """Start the evaluators of the job's debugging rules (see ``debugging_evaluators``)."""
        for label, indexes in debugging_evaluators(self.plan.debug_rules):
            execution = self._start(self._debugging_launch(label, indexes))
            if execution is not None and len(indexes) > 1:
                places = {
                    str(self.plan.debug_rules[index].get("RuleConfigurationName")): index
                    for index in indexes
                }
                self._apart[id(execution)] = functools.partial(self._debugging_alone, places)
        if self.plan.debug_rules:
            log.info("started the evaluators of %d rule(s)", len(self.plan.debug_rules))

    def _debugging_alone(self, places: Mapping[str, int], name: str) -> RuleLaunch:
        """The evaluator that takes up the debugging rule ``name`` alone (``places``: each
        rule's place in the job)."""
        return self._debugging_launch(name, [places[name]], resume=True)

    def _debugging_launch(
        self, label: str, indexes: Sequence[int], *, resume: bool = False
    ) -> RuleLaunch:
        label = self._label(label)
        heartbeat = self.layout.rule_heartbeat(label)
        command = [
            self.plan.python,
            "-m",
            "trainprobe.jobs.processes.rule_process",
            "--launch-file",
            self.layout.launch_file,
            "--runner-pid",
            str(self.runner_pid),
            "--heartbeat",
            heartbeat,
        ]
        for index in indexes:
            command += ["--index", str(index)]
        if resume:
            command.append("--resume")
        names = tuple(rule_names(self.plan.debug_rules[index] for index in indexes))
        return RuleLaunch(
            f"rule {label}" if len(names) == 1 else "built-in rules",
            names,
            tuple(command),
            self.plan.rules_working_dir,
            self.layout.rule_log(label),
            heartbeat,
        )

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
        launch = self._profiler_launch(
            f"profiler-rules{suffix}", entries, profiler_config, f"profilerrules{suffix}"
        )
        execution = self._start(launch)
        if execution is not None and added:
            log.info("started the profiler rules added by UpdateTrainingJob: %s", ", ".join(names))
        if execution is not None and len(entries) > 1:
            by_name = dict(zip(names, entries, strict=True))
            self._apart[id(execution)] = functools.partial(
                self._profiler_alone, by_name, profiler_config
            )

    def _profiler_alone(
        self,
        entries: Mapping[str, dict[str, Any]],
        profiler_config: Mapping[str, Any] | None,
        name: str,
    ) -> RuleLaunch:
        """The evaluator that takes up the profiler rule ``name`` alone (``entries``: each
        rule's configuration)."""
        return self._profiler_launch(
            name, [entries[name]], profiler_config, f"profilerrules-{name}", resume=True
        )

    def _profiler_launch(
        self,
        label: str,
        entries: list[dict[str, Any]],
        profiler_config: Mapping[str, Any] | None,
        request_name: str,
        *,
        resume: bool = False,
    ) -> RuleLaunch:
        label = self._label(label)
        request_file = os.path.join(self.layout.config_dir, f"{request_name}.json")
        with open(request_file, "w", encoding="utf-8") as file:
            json.dump(entries, file)
        heartbeat = self.layout.rule_heartbeat(label)
        command = [
            self.plan.python,
            "-m",
            "trainprobe.jobs.processes.profiler_rules_process",
            "--runner-pid",
            str(self.runner_pid),
            "--heartbeat",
            heartbeat,
            *(["--resume"] if resume else []),
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
        return RuleLaunch(
            label,
            tuple(rule_names(entries)),
            tuple(command),
            self.layout.job_dir,
            self.layout.rule_log(label),
            heartbeat,
        )

    def _label(self, label: str) -> str:
        """``label``, made unlike every label already given (it names a log and a heartbeat)."""
        while label in self._labels:
            label += "-"
        self._labels.add(label)
        return label

    def _start(self, launch: RuleLaunch) -> RuleExecution | None:
        try:
            execution = self.executor.start(launch)
        except OSError as error:
            # Rules that cannot start must not end the job: they end in Error, saying why.
            log.exception("could not start the %s", launch.label)
            record_unfinished_rules(
                self.layout,
                launch.rule_names,
                f"the rule evaluator could not be started: {error}",
            )
            return None
        self.executions.append(execution)
        return execution

    def record_not_started(self, profiler_entries: Sequence[Mapping[str, Any]], why: str) -> None:
        """Record every rule of the job (its debugging rules and ``profiler_entries``) as
        Error, saying ``why`` none was started (the training could not start)."""
        names = rule_names([*self.plan.debug_rules, *profiler_entries])
        record_unfinished_rules(self.layout, names, f"the rule was not started: {why}")

    # ----- watching and ending ------------------------------------------------------------

    def check(self) -> None:
        """Look at every evaluator that has ended since the last look with rules unfinished:
        take them up apart, or record them as Error saying how it ended (see the module
        docstring)."""
        for execution in list(self.executions):
            if id(execution) in self._settled:
                continue
            ending = execution.poll()
            if ending is None:
                continue
            self._settled.add(id(execution))
            names = execution.launch.rule_names
            apart = self._apart.pop(id(execution), None)
            if apart is not None and not self._stopping:
                unfinished = unfinished_rules(self.layout, names)
                if unfinished:
                    self._take_up_apart(execution.launch, unfinished, ending, apart)
                    continue
            earlier = self._taken_up.get(id(execution))
            if earlier is not None:
                ending = (
                    f"{ending}, evaluating this rule alone (the process it shared with other "
                    f"rules had ended: {earlier})"
                )
            recorded = record_unfinished_rules(self.layout, names, ending)
            if recorded:
                log.warning("%s: %s", ", ".join(recorded), ending)

    def _take_up_apart(
        self,
        launch: RuleLaunch,
        names: Sequence[str],
        ending: str,
        apart: Callable[[str], RuleLaunch],
    ) -> None:
        """Start each of the rules ``names`` that the evaluator ``launch`` left unfinished when
        it ended (``ending``) in an evaluator of its own, from where it was."""
        log.warning(
            "the %s ended (%s): taking up %s, each in a process of its own",
            launch.label,
            ending,
            ", ".join(names),
        )
        record_unfinished_rules(
            self.layout,
            names,
            f"taken up in a process of its own: the process it shared with other rules ended "
            f"({ending})",
            status=RuleEvaluationStatus.IN_PROGRESS,
        )
        for name in names:
            execution = self._start(apart(name))
            if execution is not None:
                self._taken_up[id(execution)] = ending

    def running(self) -> bool:
        """Whether any evaluator still runs."""
        self.check()
        return any(id(execution) not in self._settled for execution in self.executions)

    def stop(self, grace_seconds: float, why: str) -> None:
        """Stop every evaluator still running: their rules end Stopped; one that does not stop
        within ``grace_seconds`` is killed, and its unfinished rules end in Error, saying
        ``why`` it was stopped."""
        self._stopping = True
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


class DebuggingEvaluator(NamedTuple):
    """One process evaluating debugging rules: its ``label`` (it names the process's log and
    heartbeat) and the places of its rules in the job's DebugRuleConfigurations."""

    label: str
    rule_indexes: list[int]


def debugging_evaluators(entries: Sequence[Mapping[str, Any]]) -> list[DebuggingEvaluator]:
    """How a job's debugging rules (its DebugRuleConfigurations ``entries``) are spread over
    evaluator processes.

    The built-in rules share one (``BUILTIN_RULES_EVALUATOR``, unless a rule has that name): they
    read the same tensors at the same steps, and one process reads each new step once for all
    of them, where a process per rule would each list and read it again; a built-in rule that
    fails still ends in Error alone, and the others go on. Each custom rule (the user's code,
    which may hang, crash its process or hold its memory) has a process of its own, labelled
    with its name, as has an entry that cannot be read (its process records why).
    """
    shared: list[int] = []
    evaluators: list[DebuggingEvaluator] = []
    for index, entry in enumerate(entries):
        if _is_builtin(entry):
            shared.append(index)
        else:
            evaluators.append(DebuggingEvaluator(str(entry.get("RuleConfigurationName")), [index]))
    if shared:
        label = BUILTIN_RULES_EVALUATOR
        while label in rule_names(entries):  # a custom rule of that name keeps its own files
            label += "-"
        evaluators.insert(0, DebuggingEvaluator(label, shared))
    return evaluators


def rule_log(plan: LaunchPlan, rule_name: str) -> str:
    """The log of the process that evaluates the rule ``rule_name`` of the job ``plan``
    launches: the rule's own, once it was taken up alone (or when it is not one of the job's
    debugging rules), else the log of the evaluator it shares."""
    own = plan.layout.rule_log(rule_name)
    if os.path.exists(own):
        return own
    for label, indexes in debugging_evaluators(plan.debug_rules):
        names = rule_names(plan.debug_rules[index] for index in indexes)
        if rule_name in names:
            return plan.layout.rule_log(label)
    return own


def _is_builtin(entry: Mapping[str, Any]) -> bool:
    try:
        return Rule.from_request_dict(entry).spec is not None
    except ConfigError:
        return False
