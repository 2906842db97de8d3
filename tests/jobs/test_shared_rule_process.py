"""Rules that share a process lose nothing when it dies.

A job's built-in rules share one evaluator process and its profiler rules another. When one of
them is killed (``kill -9``, as the OOM killer or the rules' memory limit would), each rule it left
unfinished is taken up in a process of its own from its last evaluated step, and reaches its own
verdict; a rule whose evaluation kills its process again ends in Error saying how. The trainings,
the processes and the kills are real.
"""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest
from job_helpers import request, rule, wait_for

from timing import wait_until
from trainprobe.jobs import JobStore, create_training_job
from trainprobe.storage.rule_output import read_evaluations, read_status

pytestmark = pytest.mark.slow

STEPS = 300
PROFILER_RULES = [
    {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
        "RuleParameters": {"rule_to_invoke": name},
    }
    for name in ("ProfilerReport", "CPUBottleneck")
]
BUILT_IN_RULES = [rule("LossNotDecreasing"), rule("AllZero", collection_names="losses")]

KILLS_ITSELF = """
import os
import signal

from trainprobe.rules import Rule


class KillsItself(Rule):
    def invoke_at_step(self, step):
        if step >= 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return False
"""


def start_job(store: JobStore, output: Path, name: str, *custom: dict[str, Any]) -> Path:
    create_training_job(
        request(
            name,
            output,
            *("--steps", str(STEPS), "--sleep", "0.05"),
            DebugRuleConfigurations=[*BUILT_IN_RULES, *custom],
            ProfilerRuleConfigurations=PROFILER_RULES,
            ProfilerConfig={"ProfilingIntervalInMilliseconds": 500},
        ),
        store=store,
    )
    return output / name


def rule_processes(store: JobStore, name: str, module: str) -> list[psutil.Process]:
    """The job's processes running ``module`` (a rule evaluator's), with their command lines."""
    record = store.get(name)
    assert record is not None and record.runner_pid is not None
    found = []
    for process in psutil.Process(record.runner_pid).children(recursive=True):
        try:
            if module in process.cmdline():
                found.append(process)
        except psutil.Error:
            continue
    return found


def evaluated(job: Path, rule_name: str) -> int:
    return len(read_evaluations(str(job / "rule-output" / rule_name)))


def statuses(description: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        item["RuleConfigurationName"]: item
        for item in [
            *description["DebugRuleEvaluationStatuses"],
            *description["ProfilerRuleEvaluationStatuses"],
        ]
    }


def kill_shared_evaluators(store: JobStore, name: str, job: Path) -> None:
    """Once the built-in rules have evaluated some steps, kill -9 the process evaluating them
    and the one evaluating the profiler rules."""
    wait_until(lambda: evaluated(job, "AllZero") >= 5, "AllZero to evaluate 5 steps")
    for module in (
        "trainprobe.jobs.processes.rule_process",
        "trainprobe.jobs.processes.profiler_rules_process",
    ):
        [shared] = rule_processes(store, name, module)
        shared.send_signal(signal.SIGKILL)


def test_the_rules_of_a_killed_process_are_taken_up_apart_and_reach_their_verdicts(
    store: JobStore, tmp_path: Path
) -> None:
    job = start_job(store, tmp_path / "out", "shared")
    kill_shared_evaluators(store, "shared", job)

    # Each rule is taken up alone, saying so until its own process reports.
    def taken_up(description: dict[str, Any]) -> bool:
        return (
            all(
                item["RuleEvaluationStatus"] == "InProgress"
                for item in statuses(description).values()
            )
            and len(rule_processes(store, "shared", "--resume")) == 4
        )

    wait_for(store, "shared", taken_up, "the four rules to be taken up apart", timeout=30)

    described = wait_for(store, "shared")
    assert described["TrainingJobStatus"] == "Completed"
    final = statuses(described)
    assert {name: item["RuleEvaluationStatus"] for name, item in final.items()} == {
        "LossNotDecreasing": "NoIssuesFound",
        "AllZero": "NoIssuesFound",
        "ProfilerReport": "NoIssuesFound",
        "CPUBottleneck": "NoIssuesFound",
    }
    # Every step was evaluated once, in order, by one process or the other: none was lost, none
    # written twice; and the counts in the final statuses are those of all the steps.
    for name in ("LossNotDecreasing", "AllZero"):
        directory = str(job / "rule-output" / name)
        steps = [line["step"] for line in read_evaluations(directory)]
        assert steps == list(range(STEPS)), name
        status = read_status(directory)
        assert status is not None
        judged = [line for line in read_evaluations(directory) if line["result"] != "Skipped"]
        assert status.steps_evaluated == len(judged), name
    for name in ("ProfilerReport", "CPUBottleneck"):
        windows = [line["step"] for line in read_evaluations(str(job / "rule-output" / name))]
        assert windows == list(range(len(windows))) and windows, name
    # Each rule's own process has its own log.
    for name in final:
        assert (job / "logs" / "rules" / f"{name}.log").exists(), name


def test_a_rule_that_kills_its_process_again_ends_in_error_and_the_others_pass(
    store: JobStore, tmp_path: Path
) -> None:
    source = tmp_path / "kills_itself.py"
    source.write_text(textwrap.dedent(KILLS_ITSELF))
    custom = {
        "RuleConfigurationName": "KillsItself",
        "RuleEvaluatorImage": "custom-rule-evaluator:latest",
        "RuleParameters": {"source_s3_uri": str(source), "rule_to_invoke": "KillsItself"},
    }
    job = start_job(store, tmp_path / "out", "again", custom)
    kill_shared_evaluators(store, "again", job)

    # What kills the shared process kills LossNotDecreasing's own again, as the OOM killer would.
    def alone() -> list[psutil.Process]:
        found = []
        for process in rule_processes(store, "again", "trainprobe.jobs.processes.rule_process"):
            try:
                words = process.cmdline()
            except psutil.Error:
                continue
            if "--resume" in words and words[words.index("--index") + 1] == "0":
                found.append(process)
        return found

    wait_until(lambda: alone(), "LossNotDecreasing's own process")
    alone()[0].send_signal(signal.SIGKILL)

    described = wait_for(store, "again")
    assert described["TrainingJobStatus"] == "Completed"
    final = statuses(described)
    assert final["LossNotDecreasing"]["RuleEvaluationStatus"] == "Error"
    assert final["LossNotDecreasing"]["StatusDetails"] == (
        "the rule process was killed by signal 9 (SIGKILL), evaluating this rule alone (the "
        "process it shared with other rules had ended: the rule process was killed by signal 9 "
        "(SIGKILL))"
    )
    assert final["KillsItself"]["RuleEvaluationStatus"] == "Error"
    assert final["KillsItself"]["StatusDetails"] == (
        "the rule process was killed by signal 9 (SIGKILL)"
    )
    for name in ("AllZero", "ProfilerReport", "CPUBottleneck"):
        assert final[name]["RuleEvaluationStatus"] == "NoIssuesFound", final[name]
