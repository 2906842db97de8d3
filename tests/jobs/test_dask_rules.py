"""A job's rules on a Dask cluster (``TRAINPROBE_RULE_EXECUTOR=dask://HOST:PORT``).

The cluster is a real ``distributed.LocalCluster`` on 127.0.0.1 with its workers in processes of
their own; the jobs are real trainings (``plain_training.py``). Each test checks what a user would
see: the job's status and reason, each rule's status, and that the rules ran on the cluster's
workers (the rule's log names the worker), not beside the training.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import distributed
import pytest
from job_helpers import PLAIN_TRAINING, request, rule, rule_statuses, wait_for

from timing import wait_until
from trainprobe import debugger
from trainprobe.config.errors import ConfigError
from trainprobe.estimator import Estimator
from trainprobe.jobs import (
    JobStore,
    create_training_job,
    describe_training_job,
    stop_training_job,
)
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.jobs.operations.admission import admit_training_job
from trainprobe.jobs.operations.progress import latest_saved_step
from trainprobe.jobs.runner.dask_rule_executor import DaskRuleExecutor
from trainprobe.jobs.runner.job_rules import JobRules, rule_log
from trainprobe.storage.job_layout import launch_file_of
from trainprobe.storage.rule_output import read_evaluations, read_status

PROFILER_STATUSES = "ProfilerRuleEvaluationStatuses"
STOP_TRAINING = json.dumps({"name": "StopTraining"})
WORKER = re.compile(r"running on the Dask worker (\S+)")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A Dask cluster of two worker processes on 127.0.0.1, for the whole module."""
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as local_cluster:
        yield local_cluster


@pytest.fixture
def client(cluster: Any) -> Iterator[Any]:
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as connected:
        yield connected


def on_dask(cluster: Any) -> dict[str, str]:
    """The Environment that sends a job's rules to ``cluster``."""
    address = cluster.scheduler_address.removeprefix("tcp://")
    return {"TRAINPROBE_RULE_EXECUTOR": f"dask://{address}"}


def profiler_rule(name: str) -> dict[str, Any]:
    return {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
        "RuleParameters": {"rule_to_invoke": name},
    }


def worker_of(job: Path, rule_name: str) -> str | None:
    """The worker the log of the rule's evaluator says it runs on."""
    if not os.path.exists(launch_file_of(str(job))):
        return None
    log = Path(rule_log(LaunchPlan.read(str(job)), rule_name))
    found = WORKER.search(log.read_text()) if log.exists() else None
    return found.group(1) if found else None


@pytest.mark.slow
def test_rules_on_dask_give_the_verdicts_they_give_locally(
    store: JobStore, tmp_path: Path, cluster: Any, client: Any
) -> None:
    output = tmp_path / "out"
    members: dict[str, Any] = {
        "DebugRuleConfigurations": [
            rule("LossNotDecreasing"),
            rule("AllZero", collection_names="losses"),
        ],
        "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 500},
        "ProfilerRuleConfigurations": [profiler_rule("OverallSystemUsage")],
    }
    # 16 steps: LossNotDecreasing's first comparison (5 losses on each side) is at step 14.
    create_training_job(request("local", output, "--steps", "16", **members), store=store)
    create_training_job(
        request("dask", output, "--steps", "16", Environment=on_dask(cluster), **members),
        store=store,
    )
    local = wait_for(store, "local")
    dask = wait_for(store, "dask")

    assert dask["TrainingJobStatus"] == local["TrainingJobStatus"] == "Completed"
    assert rule_statuses(dask) == rule_statuses(local)
    assert rule_statuses(dask) == {"LossNotDecreasing": "NoIssuesFound", "AllZero": "NoIssuesFound"}
    assert rule_statuses(dask, PROFILER_STATUSES) == rule_statuses(local, PROFILER_STATUSES)
    assert rule_statuses(dask, PROFILER_STATUSES) == {"OverallSystemUsage": "NoIssuesFound"}
    workers = set(client.scheduler_info(n_workers=-1)["workers"])
    for name in ("LossNotDecreasing", "AllZero", "profiler-rules"):
        assert worker_of(output / "dask", name) in workers, name
        assert worker_of(output / "local", name) is None, name
    # The two evaluators (the built-in rules, the profiler rules) spread over the two workers.
    assert worker_of(output / "dask", "AllZero") != worker_of(output / "dask", "profiler-rules")
    # The workers wrote each rule's output into the job's storage, step by step.
    for job in ("local", "dask"):
        evaluations = read_evaluations(str(output / job / "rule-output" / "AllZero"))
        assert len(evaluations) == 16, job


@pytest.mark.slow
def test_a_rule_on_dask_stops_the_training_with_its_stoptraining_action(
    store: JobStore, tmp_path: Path, cluster: Any
) -> None:
    output = tmp_path / "out"
    nan_step = 8
    # Unstopped, this training would run 100000 steps (more than an hour and a half).
    create_training_job(
        request(
            "diverging",
            output,
            *("--steps", "100000", "--sleep", "0.05", "--nan-at", str(nan_step)),
            DebugRuleConfigurations=[rule("ExplodingTensor", action_json=STOP_TRAINING)],
            Environment=on_dask(cluster),
        ),
        store=store,
    )
    described = wait_for(store, "diverging")

    assert described["TrainingJobStatus"] == "Stopped"
    reason = described["FailureReason"]
    assert "ExplodingTensor" in reason and f"step {nan_step}" in reason
    assert rule_statuses(described) == {"ExplodingTensor": "IssuesFound"}
    assert worker_of(output / "diverging", "ExplodingTensor") is not None
    assert "finished" not in (output / "diverging" / "logs" / "training.log").read_text()


def test_a_job_naming_a_cluster_that_does_not_answer_is_refused(
    store: JobStore, tmp_path: Path
) -> None:
    nowhere = "dask://127.0.0.1:9"  # the discard port: nothing answers there
    with pytest.raises(ConfigError) as raised:
        create_training_job(
            request(
                "nowhere",
                tmp_path / "out",
                DebugRuleConfigurations=[rule("LossNotDecreasing")],
                Environment={"TRAINPROBE_RULE_EXECUTOR": nowhere},
            ),
            store=store,
        )
    assert raised.value.field == "Environment.TRAINPROBE_RULE_EXECUTOR"
    assert raised.value.value == nowhere
    assert "Dask scheduler that answers" in str(raised.value)
    assert store.get("nowhere") is None


@pytest.mark.parametrize("value", ["dask:/127.0.0.1:8786", "dask://127.0.0.1", "tcp://h:1", "yes"])
def test_a_rule_executor_that_is_not_one_is_refused(
    store: JobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # Set in the environment that creates the job, not in the request.
    monkeypatch.setenv("TRAINPROBE_RULE_EXECUTOR", value)
    with pytest.raises(ConfigError) as raised:
        create_training_job(request("malformed", tmp_path / "out"), store=store)
    assert raised.value.field == "$TRAINPROBE_RULE_EXECUTOR"
    assert raised.value.value == value
    assert raised.value.allowed == "local, or dask://HOST:PORT (a Dask distributed scheduler)"
    assert store.get("malformed") is None


def test_trainprobe_run_refuses_a_rule_executor_that_does_not_answer(tmp_path: Path) -> None:
    finished = subprocess.run(
        [
            *(sys.executable, "-m", "trainprobe.cli.main", "run", str(PLAIN_TRAINING)),
            *("--rule", "LossNotDecreasing", "--rule-executor", "dask://127.0.0.1:9", "--plain"),
        ],
        env={**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 2
    assert "TRAINPROBE_RULE_EXECUTOR: 'dask://127.0.0.1:9' is not valid" in finished.stderr
    assert "Dask scheduler that answers" in finished.stderr


@pytest.mark.slow
def test_the_estimator_runs_its_rules_on_the_cluster_it_names(
    store: JobStore, tmp_path: Path, cluster: Any, client: Any
) -> None:
    estimator = Estimator(
        entry_point=PLAIN_TRAINING.name,
        source_dir=str(PLAIN_TRAINING.parent),
        hyperparameters={"steps": 12},
        rules=[
            debugger.Rule.sagemaker(
                debugger.rule_configs.loss_not_decreasing(),
                rule_parameters={"num_steps": "2"},
                # The rule's default config saves losses every 500 steps: one, in 12 steps; it
                # averages 5 on each side of a comparison.
                collections_to_save=[debugger.CollectionConfig("losses", {"save_interval": "1"})],
            )
        ],
        debugger_hook_config=debugger.DebuggerHookConfig(hook_parameters={"save_interval": "1"}),
        output_path=str(tmp_path / "out"),
        rule_executor=on_dask(cluster)["TRAINPROBE_RULE_EXECUTOR"],
        store=store,
    )
    estimator.fit(logs=False)
    summary = estimator.rule_job_summary()
    assert [(s["RuleConfigurationName"], s["RuleEvaluationStatus"]) for s in summary] == [
        ("LossNotDecreasing", "NoIssuesFound")
    ]
    job = estimator.latest_training_job
    assert job is not None
    workers = set(client.scheduler_info(n_workers=-1)["workers"])
    assert worker_of(tmp_path / "out" / job.name, "LossNotDecreasing") in workers


@pytest.mark.slow
def test_the_rules_of_a_lost_worker_are_taken_up_apart_on_the_workers_left(
    store: JobStore, tmp_path: Path, cluster: Any, client: Any
) -> None:
    output = tmp_path / "out"
    create_training_job(
        request(
            "killed",
            output,
            *("--steps", "100000", "--sleep", "0.05"),
            DebugRuleConfigurations=[
                rule("LossNotDecreasing"),
                rule("AllZero", collection_names="losses"),
            ],
            Environment=on_dask(cluster),
        ),
        store=store,
    )
    job = output / "killed"
    wait_until(lambda: worker_of(job, "LossNotDecreasing"), "the built-in rules to run")
    wait_until(lambda: (latest_saved_step(str(job / "debug-output")) or 0) >= 5, "5 saved steps")
    shared = worker_of(job, "LossNotDecreasing")
    assert shared is not None and worker_of(job, "AllZero") == shared  # one task for both
    pids = client.run(os.getpid)
    os.kill(pids[shared], signal.SIGKILL)

    # Each rule is taken up by a task of its own, on a worker that lives.
    def apart() -> bool:
        logs = [job / "logs" / "rules" / f"{name}.log" for name in ("LossNotDecreasing", "AllZero")]
        return all(log.exists() and WORKER.search(log.read_text()) for log in logs)

    wait_until(apart, "both rules to be taken up on a worker", timeout=60)
    workers = set(client.scheduler_info(n_workers=-1)["workers"])
    for name in ("LossNotDecreasing", "AllZero"):
        assert worker_of(job, name) in workers - {shared}, name
    described = describe_training_job({"TrainingJobName": "killed"}, store=store)
    assert described["TrainingJobStatus"] == "InProgress"
    assert set(rule_statuses(described).values()) == {"InProgress"}

    stop_training_job({"TrainingJobName": "killed"}, store=store)
    described = wait_for(store, "killed")
    assert described["TrainingJobStatus"] == "Stopped"
    # Both conclude on the steps saved, as if their worker had never been lost.
    assert rule_statuses(described) == {
        "LossNotDecreasing": "NoIssuesFound",
        "AllZero": "NoIssuesFound",
    }


@pytest.mark.slow
def test_a_runner_stopped_by_sigterm_stops_its_rules_on_the_cluster(
    store: JobStore, tmp_path: Path, cluster: Any, client: Any
) -> None:
    output = tmp_path / "out"
    create_training_job(
        request(
            "terminated",
            output,
            *("--steps", "100000", "--sleep", "0.05"),
            # Ten losses (5 on each side, 2 steps apart) are enough for it to judge.
            DebugRuleConfigurations=[rule("LossNotDecreasing", num_steps="2")],
            Environment=on_dask(cluster),
        ),
        store=store,
    )
    job = output / "terminated"
    wait_until(lambda: worker_of(job, "LossNotDecreasing"), "the rule to run on a worker")
    wait_until(lambda: (latest_saved_step(str(job / "debug-output")) or 0) >= 12, "12 saved steps")
    record = store.get("terminated")
    assert record is not None and record.runner_pid is not None
    os.kill(record.runner_pid, signal.SIGTERM)

    described = wait_for(store, "terminated")
    assert described["TrainingJobStatus"] == "Stopped"
    assert described["FailureReason"] == "The job runner received SIGTERM"
    # The rule concluded on the steps saved, or heard the runner's stop before it could: either
    # way its task has ended, and nothing is left running on the cluster.
    assert rule_statuses(described)["LossNotDecreasing"] in ("NoIssuesFound", "Stopped")
    wait_until(
        lambda: not any(keys for keys in client.processing().values()),
        "the cluster to run no task",
        timeout=30,
    )


@pytest.mark.slow
def test_a_rule_task_told_to_stop_ends_stopped(tmp_path: Path, cluster: Any, client: Any) -> None:
    # A job whose training never starts: its rule waits for tensors until it is told to stop.
    admission = admit_training_job(
        request("waiting", tmp_path / "out", DebugRuleConfigurations=[rule("LossNotDecreasing")])
    )
    admission.layout.create()
    admission.plan.write()
    executor = DaskRuleExecutor(
        cluster.scheduler_address, job_name="waiting", progress_timeout_seconds=120
    )
    rules = JobRules(admission.plan, executor, os.getpid())
    try:
        rules.start_debugging_rules()
        job = tmp_path / "out" / "waiting"
        wait_until(lambda: worker_of(job, "LossNotDecreasing"), "the rule to run on a worker")
        status = job / "rule-output" / "LossNotDecreasing" / "status.json"
        wait_until(status.exists, "the rule's first status")
        assert rules.running()

        rules.stop(30, "the test stopped it")
    finally:
        executor.close()
    assert not rules.running()
    final = read_status(str(status.parent))
    assert final is not None and final.rule_evaluation_status == "Stopped"
    assert final.status_details == (
        "stopped on request: 0 step(s) evaluated, 0 tensor(s) checked, 0 step(s) skipped"
    )
    assert not any(keys for keys in client.processing().values())
