"""What the job tests share: requests for the test trainings, and waiting for a job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainprobe.jobs import JobStore, describe_training_job

HERE = Path(__file__).resolve().parent
PLAIN_TRAINING = HERE / "plain_training.py"

FINAL = ("Completed", "Failed", "Stopped")
UNFINISHED_RULE = ("InProgress", "Stopping")


def rule(name: str, rule_to_invoke: str | None = None, **parameters: str) -> dict[str, Any]:
    """A DebugRuleConfigurations entry for built-in rule ``rule_to_invoke`` (default: name)."""
    return {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
        "RuleParameters": {"rule_to_invoke": rule_to_invoke or name, **parameters},
    }


def request(
    name: str, output: Path, *arguments: str, script: Path = PLAIN_TRAINING, **members: Any
) -> dict[str, Any]:
    """A CreateTrainingJob request running ``script`` with ``arguments``, saving every step."""
    body: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "ContainerEntrypoint": [str(script)],
            "ContainerArguments": list(arguments),
        },
        "OutputDataConfig": {"S3OutputPath": str(output)},
        "DebugHookConfig": {"HookParameters": {"save_interval": "1"}},
    }
    body.update(members)
    return body


def finished(description: dict[str, Any]) -> bool:
    """Whether the job and all its rules have reached their final status."""
    rules = [
        *description.get("DebugRuleEvaluationStatuses", []),
        *description.get("ProfilerRuleEvaluationStatuses", []),
    ]
    return description["TrainingJobStatus"] in FINAL and all(
        item["RuleEvaluationStatus"] not in UNFINISHED_RULE for item in rules
    )


def wait_for(
    store: JobStore,
    name: str,
    condition: Callable[[dict[str, Any]], bool] = finished,
    what: str = "the job and its rules to finish",
    timeout: float = 180.0,
) -> dict[str, Any]:
    """The job's description once ``condition`` holds; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        description = describe_training_job({"TrainingJobName": name}, store=store)
        if condition(description):
            return description
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}: {description}")
        time.sleep(0.2)


def rule_statuses(
    description: dict[str, Any], key: str = "DebugRuleEvaluationStatuses"
) -> dict[str, str]:
    """Each rule's status, by configuration name."""
    items = description[key]
    return {item["RuleConfigurationName"]: item["RuleEvaluationStatus"] for item in items}


def wait_until_ended(store: JobStore, timeout: float = 120.0) -> None:
    """Wait for every job's runner to be done, for jobs that end by themselves (running ``true``).

    Stopping a job whose runner has only just started can kill that runner (it has not yet
    taken over its wake-up signal), so these tests let their jobs end instead.
    """
    deadline = time.monotonic() + timeout
    while any(not record.runner_done for record in store.query()):
        assert time.monotonic() < deadline, [r.name for r in store.query() if not r.runner_done]
        time.sleep(0.2)


def trainprobe(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``trainprobe ARGUMENTS`` run in ``tmp_path``, with its own TRAINPROBE_HOME there."""
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", *arguments],
        env={**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
