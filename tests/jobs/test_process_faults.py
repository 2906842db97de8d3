"""Faults in a job's processes: each kind killed at a seeded random moment, a rule that hangs, a
rule that wants too much memory, a rule whose process exits.

Whatever dies, the job's other processes end with it or go on as they should, nothing is left
running, every status becomes final within a bounded time and says what happened, and every step
the training completed reads back (with trainprobe, and with smdebug 1.0.34 for one of them).
"""

from __future__ import annotations

import os
import random
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from job_helpers import request, rule, wait_for
from tests.reference_envs import run_reference

from timing import wait_until
from trainprobe.jobs import JobStore, create_training_job, stop_training_job
from trainprobe.jobs.operations.progress import latest_saved_step
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

LOSS = "CrossEntropyLoss_output_0"
SEED = 20261125
FINAL_WITHIN_SECONDS = 120.0
GONE_WITHIN_SECONDS = 60.0

# The command-line word that tells each kind of the job's processes apart.
KINDS = {
    "training": "trainprobe.jobs.processes.training_entry",
    "system monitor": "trainprobe.capture.system_monitor",
    "debugging rule": "trainprobe.jobs.processes.rule_process",
    "profiler rules": "trainprobe.jobs.processes.profiler_rules_process",
}

PROFILER_RULE = {
    "RuleConfigurationName": "CPUBottleneck",
    "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
    "RuleParameters": {"rule_to_invoke": "CPUBottleneck"},
}


def long_job(store: JobStore, output: Path, name: str, **members: Any) -> Path:
    """Start a training that runs until stopped, with a debugging and a profiler rule."""
    body: dict[str, Any] = {
        "DebugRuleConfigurations": [rule("LossNotDecreasing")],
        "ProfilerRuleConfigurations": [PROFILER_RULE],
        "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 500},
    }
    body.update(members)
    create_training_job(
        request(name, output, "--steps", "100000", "--sleep", "0.05", **body), store=store
    )
    return output / name


def job_processes(store: JobStore, name: str) -> list[psutil.Process]:
    """The job's runner and every process under it."""
    record = store.get(name)
    assert record is not None and record.runner_pid is not None
    runner = psutil.Process(record.runner_pid)
    return [runner, *runner.children(recursive=True)]


def process_of(store: JobStore, name: str, kind: str) -> psutil.Process:
    """The job's process of ``kind``, once it runs."""
    found: list[psutil.Process] = []

    def look() -> bool:
        if kind == "runner":
            found[:] = job_processes(store, name)[:1]
        else:
            found[:] = [
                process
                for process in job_processes(store, name)
                if KINDS[kind] in " ".join(_cmdline(process))
            ]
        return bool(found)

    wait_until(look, f"the job's {kind} process")
    return found[0]


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    living = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                living.append(process)
        except psutil.Error:
            continue
    return living


def described_processes(processes: list[psutil.Process]) -> list[str]:
    """Each process's id, status and command line, for a failure message."""
    described = []
    for process in processes:
        try:
            described.append(f"{process.pid} {process.status()}: {' '.join(process.cmdline())}")
        except psutil.Error:
            continue
    return described


def statuses(description: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rules = [
        *description.get("DebugRuleEvaluationStatuses", []),
        *description.get("ProfilerRuleEvaluationStatuses", []),
    ]
    return {item["RuleConfigurationName"]: item for item in rules}


def saved_steps_read_back(debug_output: Path) -> list[int]:
    """Every step the trial lists, each read back (a value of the loss at each)."""
    trial = create_trial(str(debug_output))
    loss = trial.tensor(LOSS)
    steps = loss.steps()
    for step in steps:
        assert loss.value(step).size == 1
    return steps


@pytest.mark.parametrize(
    "kind", ["training", "runner", "system monitor", "debugging rule", "profiler rules"]
)
def test_killing_a_process_of_a_job_leaves_nothing_behind_and_final_statuses(
    kind: str, store: JobStore, tmp_path: Path
) -> None:
    moments = random.Random(f"{SEED}-{kind}")
    directory = long_job(store, tmp_path / "out", "faulty")
    saved = moments.randint(2, 12)
    wait_until(
        lambda: (latest_saved_step(str(directory / "debug-output")) or -1) >= saved,
        f"{saved} saved steps",
    )
    victim = process_of(store, "faulty", kind)
    time.sleep(moments.uniform(0.0, 1.0))
    everything = job_processes(store, "faulty")
    victim.kill()

    if kind in ("debugging rule", "profiler rules"):
        rule_name = "LossNotDecreasing" if kind == "debugging rule" else "CPUBottleneck"
        other = "CPUBottleneck" if kind == "debugging rule" else "LossNotDecreasing"
        described = wait_for(
            store,
            "faulty",
            lambda d: statuses(d)[rule_name]["RuleEvaluationStatus"] == "Error",
            f"{rule_name} to end in Error",
            timeout=30,
        )
        # The rest goes on: the training, and the other rule.
        assert described["TrainingJobStatus"] == "InProgress"
        assert statuses(described)[other]["RuleEvaluationStatus"] == "InProgress"
        details = statuses(described)[rule_name]["StatusDetails"]
        assert details == "the rule process was killed by signal 9 (SIGKILL)"
    if kind in ("system monitor", "debugging rule", "profiler rules"):
        stop_training_job({"TrainingJobName": "faulty"}, store=store)

    described = wait_for(store, "faulty", timeout=FINAL_WITHIN_SECONDS)
    wait_until(
        lambda: not alive(everything),
        lambda: f"every process of the job to end: {described_processes(alive(everything))}",
        timeout=GONE_WITHIN_SECONDS,
    )
    final = statuses(described)
    # Every rule's status is final and says why; a rule's kill is not overwritten by the stop.
    assert all(item.get("StatusDetails") for item in final.values()), final
    if kind in ("debugging rule", "profiler rules"):
        assert final[rule_name]["RuleEvaluationStatus"] == "Error"
        assert final[rule_name]["StatusDetails"] == details
    if kind == "runner":
        stopped = [item for item in final.values() if item["RuleEvaluationStatus"] == "Stopped"]
        assert all(
            item["StatusDetails"].startswith("the job runner is gone") for item in stopped
        ), final
    if kind == "training":
        assert described["TrainingJobStatus"] == "Failed"
        assert described["FailureReason"].startswith(
            "AlgorithmError: the training was killed by signal 9 (SIGKILL)"
        )
    elif kind == "runner":
        assert described["TrainingJobStatus"] == "Failed"
        assert "ended before the job did" in described["FailureReason"]
    else:
        assert described["TrainingJobStatus"] == "Stopped"
        assert described["FailureReason"] == "Stopped by a StopTrainingJob request"
    steps = saved_steps_read_back(directory / "debug-output")
    assert steps[: saved + 1] == list(range(saved + 1))
    if kind in ("training", "runner"):
        # The writer was cut short: every step it completed reads in smdebug 1.0.34 too.
        read = run_reference(
            "smdebug",
            f"""
            import json
            from smdebug.trials import create_trial
            trial = create_trial({str(directory / "debug-output")!r})
            tensor = trial.tensor({LOSS!r})
            steps = tensor.steps()
            print(json.dumps([steps, [float(tensor.value(step)) for step in steps]]))
            """,
        )
        assert isinstance(read, list)
        assert read[0] == steps
        trial = create_trial(str(directory / "debug-output"))
        assert read[1] == [float(trial.tensor(LOSS).value(step)) for step in steps]


HANGING_RULE = """
import os
import time

from trainprobe.rules import Rule


class Hangs(Rule):
    def __init__(self, base_trial, at_step="3", memory_mb="0", exit_status=""):
        super().__init__(base_trial, other_trials=None)
        self.at_step = int(at_step)
        self.memory_mb = int(memory_mb)
        self.exit_status = exit_status

    def invoke_at_step(self, step):
        if step >= self.at_step:
            if self.exit_status:
                os._exit(int(self.exit_status))
            if self.memory_mb:
                hoard = bytearray(self.memory_mb * 1024 * 1024)
                return len(hoard) == 0
            while True:
                time.sleep(1)
        return False
"""


def custom_rule(name: str, source: Path, **parameters: str) -> dict[str, Any]:
    return {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": "custom-rule-evaluator:latest",
        "RuleParameters": {
            "source_s3_uri": str(source),
            "rule_to_invoke": "Hangs",
            **parameters,
        },
    }


def test_a_hung_rule_a_memory_hungry_one_and_one_that_exits_end_in_error_and_the_job_goes_on(
    store: JobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINPROBE_RULE_PROGRESS_TIMEOUT_SECONDS", "4")
    monkeypatch.setenv("TRAINPROBE_RULE_MEMORY_LIMIT_MB", "1024")
    monkeypatch.setenv("TRAINPROBE_RULE_CPUS", "1")
    source = tmp_path / "hangs.py"
    source.write_text(textwrap.dedent(HANGING_RULE))
    long_job(
        store,
        tmp_path / "out",
        "hangs",
        DebugRuleConfigurations=[
            custom_rule("hung", source),
            custom_rule("hungry", source, memory_mb="3000"),
            custom_rule("quits", source, exit_status="3"),
            rule("LossNotDecreasing"),
        ],
    )

    # Each rule runs at a lower CPU priority than its runner and the training, with its memory
    # limit, on its share of the cores (the last one).
    runner, training = job_processes(store, "hangs")[0], process_of(store, "hangs", "training")
    rule_process = process_of(store, "hangs", "debugging rule")
    assert rule_process.nice() == min(19, runner.nice() + 10) > training.nice()
    assert rule_process.rlimit(psutil.RLIMIT_DATA) == (1024 * 1024 * 1024,) * 2
    cores = sorted(runner.cpu_affinity())
    assert rule_process.cpu_affinity() == cores[-1:]
    assert sorted(training.cpu_affinity()) == cores

    def three_ended(description: dict[str, Any]) -> bool:
        found = statuses(description)
        ended = ("hung", "hungry", "quits")
        return all(found[name]["RuleEvaluationStatus"] == "Error" for name in ended)

    described = wait_for(store, "hangs", three_ended, "the three rules to end in Error", timeout=90)
    found = statuses(described)
    assert described["TrainingJobStatus"] == "InProgress"
    assert found["LossNotDecreasing"]["RuleEvaluationStatus"] == "InProgress"
    assert found["hung"]["StatusDetails"] == "no progress for 4 s: the rule process was stopped"
    assert found["hungry"]["StatusDetails"].startswith(
        "the rule process exceeded its memory limit of 1024 MB"
    )
    assert found["quits"]["StatusDetails"] == "the rule process exited with status 3"
    stop_training_job({"TrainingJobName": "hangs"}, store=store)
    described = wait_for(store, "hangs")
    # The healthy rule concluded on the steps saved, or was stopped with the job.
    final = statuses(described)["LossNotDecreasing"]["RuleEvaluationStatus"]
    assert final in ("NoIssuesFound", "Stopped")
    assert os.path.exists(tmp_path / "out" / "hangs" / "logs" / "rules" / "hung.heartbeat")


def test_the_runner_killed_by_sigterm_stops_every_child(store: JobStore, tmp_path: Path) -> None:
    long_job(store, tmp_path / "out", "terminated")
    process_of(store, "terminated", "profiler rules")
    process_of(store, "terminated", "system monitor")
    everything = job_processes(store, "terminated")
    everything[0].send_signal(signal.SIGTERM)
    described = wait_for(store, "terminated", timeout=FINAL_WITHIN_SECONDS)
    assert described["TrainingJobStatus"] == "Stopped"
    assert described["FailureReason"] == "The job runner received SIGTERM"
    wait_until(lambda: not alive(everything), "every process of the job to end", timeout=30)
