"""Training jobs end to end, as real processes: the runner, the training, the monitor, the rules.

Each test starts a job through the Python API (SageMaker's request and response shapes), waits
for it as a client would (polling DescribeTrainingJob), and checks what a user would look at:
the job's status and reason, each rule's status, and the files under the job's directory, read
back with the trial API and the metrics reader. The training is ``plain_training.py``, which
never imports trainprobe: the hook is installed by the job runner.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import statistics
import time
from pathlib import Path

import pytest
from job_helpers import PLAIN_TRAINING, request, rule, rule_statuses, wait_for

from timing import wait_until
from trainprobe.jobs import (
    JobStore,
    create_training_job,
    describe_training_job,
    stop_training_job,
    update_training_job,
)
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.jobs.operations.progress import latest_saved_step
from trainprobe.jobs.runner.job_rules import rule_log
from trainprobe.storage.rule_output import read_evaluations, read_status
from trainprobe.storage.system_metrics import SystemMetricsReader
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

LOSS = "CrossEntropyLoss_output_0"
STOP_TRAINING = json.dumps({"name": "StopTraining"})


def job_dir(output: Path, name: str) -> Path:
    return output / name


def test_a_healthy_training_completes_with_no_issues_found(store: JobStore, tmp_path: Path) -> None:
    output = tmp_path / "out"
    response = create_training_job(
        request(
            "healthy",
            output,
            "--steps",
            "12",
            DebugRuleConfigurations=[
                rule("ExplodingTensor"),
                rule("AllZero", collection_names="losses"),
            ],
            ProfilerConfig={"ProfilingIntervalInMilliseconds": 500},
        ),
        store=store,
    )
    assert response == {
        "TrainingJobArn": "arn:aws:sagemaker:local:000000000000:training-job/healthy"
    }
    described = wait_for(store, "healthy")

    assert described["TrainingJobStatus"] == "Completed"
    assert described["SecondaryStatus"] == "Completed"
    assert "FailureReason" not in described
    assert rule_statuses(described) == {
        "ExplodingTensor": "NoIssuesFound",
        "AllZero": "NoIssuesFound",
    }
    # Each StatusDetails says what the rule checked: the steps evaluated and skipped.
    for status in described["DebugRuleEvaluationStatuses"]:
        assert "found no issue: 12 step(s) evaluated, " in status["StatusDetails"]
        assert ", 0 step(s) skipped" in status["StatusDetails"]
    assert described["ProfilingStatus"] == "Enabled"
    assert (
        described["CreationTime"]
        <= described["TrainingStartTime"]
        <= described["TrainingEndTime"]
        <= described["LastModifiedTime"]
    )
    transitions = [item["Status"] for item in described["SecondaryStatusTransitions"]]
    assert transitions == ["Starting", "Training", "Completed"]
    directory = job_dir(output, "healthy")
    assert described["DebugHookConfig"]["LocalPath"] == str(directory / "debug-output")
    assert described["ModelArtifacts"]["S3ModelArtifacts"] == str(directory / "output" / "model")

    # The script never imported trainprobe: the hook was installed for it, from step 0.
    trial = create_trial(str(directory / "debug-output"))
    assert trial.tensor(LOSS).steps() == list(range(12))
    losses = [float(trial.tensor(LOSS).value(step)) for step in range(12)]
    assert losses[-1] < losses[0]
    assert len(read_evaluations(str(directory / "rule-output" / "ExplodingTensor"))) == 12
    readings = SystemMetricsReader(str(directory / "profiler-output")).events(0, 10**10)
    assert readings, "the system monitor wrote no readings"
    log = (directory / "logs" / "training.log").read_text()
    assert "finished" in log


def test_a_job_sent_as_the_sagemaker_sdk_sends_it(store: JobStore, tmp_path: Path) -> None:
    # A framework estimator names the script and its directory in JSON-encoded hyperparameters
    # and passes the others to the script as arguments.
    source = tmp_path / "source"
    source.mkdir()
    (source / "train.py").write_text(PLAIN_TRAINING.read_text())
    hyperparameters = {
        "sagemaker_program": json.dumps("train.py"),
        "sagemaker_submit_directory": json.dumps(f"file://{source}"),
        "sagemaker_region": json.dumps("us-east-1"),
        "steps": json.dumps(3),
    }
    body = request("from-the-sdk", tmp_path / "out")
    del body["AlgorithmSpecification"]
    body["AlgorithmSpecification"] = {
        "TrainingImage": "pytorch-training",
        "TrainingInputMode": "File",
    }
    body["HyperParameters"] = hyperparameters
    body["Environment"] = {"TRAINING_NOTE": "from the request"}
    create_training_job(body, store=store)
    described = wait_for(store, "from-the-sdk")

    assert described["TrainingJobStatus"] == "Completed"
    assert described["HyperParameters"] == hyperparameters
    log = (job_dir(tmp_path / "out", "from-the-sdk") / "logs" / "training.log").read_text()
    assert "arguments: ['--steps', '3']" in log
    assert f"note: from the request in {source}" in log
    trial = create_trial(str(job_dir(tmp_path / "out", "from-the-sdk") / "debug-output"))
    assert trial.tensor(LOSS).steps() == [0, 1, 2]


def test_a_training_reaching_nan_is_stopped_by_exploding_tensor(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    nan_step = 8
    # Unstopped, this training would run 100000 steps (more than an hour and a half).
    create_training_job(
        request(
            "diverging",
            output,
            "--steps",
            "100000",
            "--sleep",
            "0.05",
            "--nan-at",
            str(nan_step),
            DebugRuleConfigurations=[rule("ExplodingTensor", action_json=STOP_TRAINING)],
        ),
        store=store,
    )
    described = wait_for(store, "diverging")

    assert described["TrainingJobStatus"] == "Stopped"
    assert described["SecondaryStatus"] == "Stopped"
    reason = described["FailureReason"]
    assert "ExplodingTensor" in reason and f"step {nan_step}" in reason
    assert rule_statuses(described) == {"ExplodingTensor": "IssuesFound"}
    status = described["DebugRuleEvaluationStatuses"][0]
    assert f"at TRAIN step {nan_step}" in status["StatusDetails"]
    directory = job_dir(output, "diverging")
    actions = (directory / "rule-output" / "ExplodingTensor" / "actions.jsonl").read_text()
    assert '"action":"stoptraining"' in actions and '"ok":true' in actions
    assert "finished" not in (directory / "logs" / "training.log").read_text()
    # Stopped soon after the first NaN step: within 400 steps (20 s of training) of it.
    last = latest_saved_step(str(directory / "debug-output"))
    assert last is not None and nan_step <= last < nan_step + 400


def test_a_crashing_script_fails_with_its_error_and_the_rules_still_finish(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    create_training_job(
        request(
            "crashing",
            output,
            "--steps",
            "20",
            "--crash-at",
            "6",
            DebugRuleConfigurations=[rule("ExplodingTensor")],
        ),
        store=store,
    )
    described = wait_for(store, "crashing")

    assert described["TrainingJobStatus"] == "Failed"
    assert described["SecondaryStatus"] == "Failed"
    reason = described["FailureReason"]
    assert reason.startswith("AlgorithmError: the training exited with status 1")
    assert "ValueError: the training data ran out at step 6" in reason
    assert "plain_training.py" in reason
    assert "trainprobe/jobs/training_entry.py" not in reason
    # The rule concluded on the six steps the training saved before it crashed.
    assert rule_statuses(described) == {"ExplodingTensor": "NoIssuesFound"}
    status = read_status(str(job_dir(output, "crashing") / "rule-output" / "ExplodingTensor"))
    assert status is not None and status.steps_evaluated == 6


def test_a_job_stops_at_its_max_runtime(store: JobStore, tmp_path: Path) -> None:
    output = tmp_path / "out"
    create_training_job(
        request(
            "too-long",
            output,
            "--steps",
            "100000",
            "--sleep",
            "0.05",
            StoppingCondition={"MaxRuntimeInSeconds": 5},
        ),
        store=store,
    )
    described = wait_for(store, "too-long")

    assert described["TrainingJobStatus"] == "Stopped"
    assert described["SecondaryStatus"] == "MaxRuntimeExceeded"
    assert "MaxRuntimeInSeconds of 5 s" in described["FailureReason"]
    assert described["StoppingCondition"] == {"MaxRuntimeInSeconds": 5}


def sample_times(profiler_output: Path, after: float = 0.0) -> list[float]:
    readings = SystemMetricsReader(str(profiler_output)).events(0, 10**10)
    return sorted({reading.timestamp for reading in readings if reading.timestamp > after})


def test_update_training_job_changes_a_running_jobs_monitoring_interval(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    create_training_job(
        request(
            "monitored",
            output,
            "--steps",
            "100000",
            "--sleep",
            "0.05",
            ProfilerConfig={"ProfilingIntervalInMilliseconds": 1000},
        ),
        store=store,
    )
    profiler_output = job_dir(output, "monitored") / "profiler-output"
    wait_until(lambda: len(sample_times(profiler_output)) >= 3, "3 samples at 1000 ms")
    gaps = [b - a for a, b in itertools.pairwise(sample_times(profiler_output))]
    assert statistics.median(gaps) > 0.8

    update = {"ProfilingIntervalInMilliseconds": 100}
    response = update_training_job(
        {"TrainingJobName": "monitored", "ProfilerConfig": update}, store=store
    )
    assert response == {
        "TrainingJobArn": "arn:aws:sagemaker:local:000000000000:training-job/monitored"
    }
    changed = time.time()
    described = describe_training_job({"TrainingJobName": "monitored"}, store=store)
    assert described["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] == 100
    assert described["TrainingJobStatus"] == "InProgress"
    wait_until(
        lambda: len(sample_times(profiler_output, changed + 1.5)) >= 10, "10 samples at 100 ms"
    )
    gaps = [b - a for a, b in itertools.pairwise(sample_times(profiler_output, changed + 1.5))]
    assert statistics.median(gaps) < 0.5

    assert stop_training_job({"TrainingJobName": "monitored"}, store=store) == {}
    assert describe_training_job({"TrainingJobName": "monitored"}, store=store)[
        "TrainingJobStatus"
    ] in ("Stopping", "Stopped")
    described = wait_for(store, "monitored")
    assert described["TrainingJobStatus"] == "Stopped"
    assert described["FailureReason"] == "Stopped by a StopTrainingJob request"


def test_two_processes_through_torchrun_yield_both_workers_data(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    script = Path(__file__).resolve().parent / "ddp_plain_training.py"
    create_training_job(
        request(
            "two-workers",
            output,
            script=script,
            ResourceConfig={"InstanceCount": 2, "InstanceType": "ml.m5.xlarge"},
            DebugHookConfig={"HookParameters": {"save_interval": "1", "include_workers": "all"}},
        ),
        store=store,
    )
    described = wait_for(store, "two-workers")

    assert described["TrainingJobStatus"] == "Completed", described.get("FailureReason")
    trial = create_trial(str(job_dir(output, "two-workers") / "debug-output"))
    assert trial.workers() == ["worker_0", "worker_1"]
    loss = trial.tensor(LOSS)
    assert loss.steps() == [0, 1, 2, 3]
    for step in loss.steps():
        values = {worker: float(loss.value(step, worker=worker)) for worker in trial.workers()}
        # Each rank trains on its own batch: two different losses at every step.
        assert values["worker_0"] != values["worker_1"]
    log = (job_dir(output, "two-workers") / "logs" / "training.log").read_text()
    assert "rank 0 finished" in log and "rank 1 finished" in log
    # torchrun's stores and the workers' connections listen on the loopback address only.
    addresses = [line.split()[-1] for line in log.splitlines() if line.startswith("listening on")]
    assert addresses, log
    assert all(address.startswith("127.0.0.1:") for address in addresses), addresses


def test_twenty_debugging_rules_run_at_once(store: JobStore, tmp_path: Path) -> None:
    output = tmp_path / "out"
    rules = [rule(f"ExplodingTensor-{index}", "ExplodingTensor") for index in range(10)]
    rules += [
        rule(f"AllZero-{index}", "AllZero", collection_names="weights") for index in range(10)
    ]
    create_training_job(
        request(
            "twenty-rules",
            output,
            "--steps",
            "10",
            "--sleep",
            "0.1",
            DebugRuleConfigurations=rules,
            DebugHookConfig={
                "HookParameters": {"save_interval": "1"},
                "CollectionConfigurations": [{"CollectionName": "weights"}],
            },
        ),
        store=store,
    )
    described = wait_for(store, "twenty-rules")

    assert described["TrainingJobStatus"] == "Completed"
    statuses = rule_statuses(described)
    assert len(statuses) == 20
    assert set(statuses.values()) == {"NoIssuesFound"}
    for entry in rules:
        name = entry["RuleConfigurationName"]
        directory = job_dir(output, "twenty-rules") / "rule-output" / name
        assert [line["step"] for line in read_evaluations(str(directory))] == list(range(10))
        # ``trainprobe logs --rule NAME`` shows the log of the process that evaluated it.
        log = Path(rule_log(LaunchPlan.read(str(job_dir(output, "twenty-rules"))), name))
        assert f"{name}: NoIssuesFound" in log.read_text()


def test_a_builtin_rule_in_error_leaves_the_rules_sharing_its_process_to_their_verdicts(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    rules = [
        rule("Fails", "AllZero", collection_names="never-saved"),
        rule("ExplodingTensor"),
        rule("AllZero", collection_names="weights"),
    ]
    create_training_job(
        request(
            "one-fails",
            output,
            "--steps",
            "8",
            DebugRuleConfigurations=rules,
            DebugHookConfig={
                "HookParameters": {"save_interval": "1"},
                "CollectionConfigurations": [{"CollectionName": "weights"}],
            },
        ),
        store=store,
    )
    described = wait_for(store, "one-fails")

    assert described["TrainingJobStatus"] == "Completed"
    found = {
        status["RuleConfigurationName"]: status
        for status in described["DebugRuleEvaluationStatuses"]
    }
    assert found["Fails"]["RuleEvaluationStatus"] == "Error"
    assert "looked for collection 'never-saved'" in found["Fails"]["StatusDetails"]
    for name in ("ExplodingTensor", "AllZero"):
        assert found[name]["RuleEvaluationStatus"] == "NoIssuesFound"
        assert "found no issue: 8 step(s) evaluated" in found[name]["StatusDetails"]
    # The three were evaluated in one process: its log gives each one's verdict.
    plan = LaunchPlan.read(str(job_dir(output, "one-fails")))
    logs = {rule_log(plan, entry["RuleConfigurationName"]) for entry in rules}
    assert len(logs) == 1
    text = Path(logs.pop()).read_text()
    assert "Fails: Error: " in text
    assert "ExplodingTensor: NoIssuesFound: " in text and "AllZero: NoIssuesFound: " in text


def test_killing_the_runner_leaves_readable_outputs_and_an_explained_status(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    create_training_job(
        request(
            "orphaned",
            output,
            "--steps",
            "100000",
            "--sleep",
            "0.05",
            DebugRuleConfigurations=[rule("ExplodingTensor")],
            ProfilerConfig={"ProfilingIntervalInMilliseconds": 200},
        ),
        store=store,
    )
    directory = job_dir(output, "orphaned")
    wait_until(
        lambda: (latest_saved_step(str(directory / "debug-output")) or 0) >= 5, "5 saved steps"
    )
    runner = store.get("orphaned")
    assert runner is not None and runner.runner_pid is not None
    os.kill(runner.runner_pid, signal.SIGKILL)

    described = wait_for(
        store,
        "orphaned",
        lambda d: d["TrainingJobStatus"] != "InProgress",
        "describe to notice the runner is gone",
    )
    assert described["TrainingJobStatus"] == "Failed"
    reason = described["FailureReason"]
    assert f"the job runner (process {runner.runner_pid}" in reason
    assert "ended before the job did" in reason and str(directory) in reason
    assert described["TrainingEndTime"] >= described["TrainingStartTime"]
    # Without its runner the training stops itself, closing its files as it goes.
    wait_until(
        lambda: (directory / "debug-output" / "training_job_end.ts").exists(),
        "the training to stop and close its hook",
    )
    trial = create_trial(str(directory / "debug-output"))
    assert trial.tensor(LOSS).steps()[:5] == [0, 1, 2, 3, 4]
    assert SystemMetricsReader(str(directory / "profiler-output")).events(0, 10**10)
    # The rule's evaluator ended too (stopped, or concluded on the steps saved), and wrote so.
    rule_output = str(directory / "rule-output" / "ExplodingTensor")
    wait_until(
        lambda: (status := read_status(rule_output)) is not None and status.finished,
        "the rule's evaluator to end",
    )
    status = read_status(rule_output)
    assert status is not None
    assert status.rule_evaluation_status in ("Stopped", "NoIssuesFound")


def test_two_jobs_at_once_do_not_collide(store: JobStore, tmp_path: Path) -> None:
    output = tmp_path / "out"
    steps = {"first": 7, "second": 11}
    for name, count in steps.items():
        create_training_job(
            request(
                name,
                output,
                "--steps",
                str(count),
                DebugRuleConfigurations=[rule("ExplodingTensor")],
                ProfilerConfig={"ProfilingIntervalInMilliseconds": 500},
            ),
            store=store,
        )
    for name, count in steps.items():
        described = wait_for(store, name)
        assert described["TrainingJobStatus"] == "Completed"
        assert rule_statuses(described) == {"ExplodingTensor": "NoIssuesFound"}
        directory = job_dir(output, name)
        trial = create_trial(str(directory / "debug-output"))
        assert trial.steps() == list(range(count))
        evaluations = read_evaluations(str(directory / "rule-output" / "ExplodingTensor"))
        assert [line["step"] for line in evaluations] == list(range(count))
        assert "finished" in (directory / "logs" / "training.log").read_text()
