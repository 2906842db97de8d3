"""Jobs whose outputs go to S3 (a real SeaweedFS server, tests/seaweedfs.py).

``trainprobe run --output-path s3://bucket/prefix`` and CreateTrainingJob's S3OutputPath put
the job's outputs in the bucket under SageMaker's layout (``<prefix>/<job>/debug-output``,
``profiler-output``, ``rule-output/<rule>``), where our trial and smdebug 1.0.34's read them;
the job's own working files (config, logs) stay on this machine. A bucket that cannot be used
is refused when the job is created, naming the field and the value.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from job_helpers import finished, request, rule, rule_statuses, trainprobe, wait_for

from smdebug_s3 import read_with_smdebug
from trainprobe.config.errors import ConfigError
from trainprobe.jobs import JobStore, create_training_job, describe_training_job
from trainprobe.storage import files
from trainprobe.trials import create_trial

HERE = Path(__file__).resolve().parent
PYTORCH_TRAINING = HERE / "plain_training.py"
XGBOOST_TRAINING = HERE.parent / "capture" / "xgboost_training.py"


def described(tmp_path: Path, name: str) -> dict[str, Any]:
    store = JobStore(tmp_path / "home" / "jobs.sqlite")
    return describe_training_job({"TrainingJobName": name}, store=store)


def matching(keys: list[str], start: str, end: str) -> list[str]:
    return [key for key in keys if key.startswith(start) and key.endswith(end)]


@pytest.mark.slow
def test_a_pytorch_run_writes_every_output_to_the_bucket(tmp_path: Path, s3_url: str) -> None:
    finished = trainprobe(
        tmp_path,
        "run",
        str(PYTORCH_TRAINING),
        "--rule", "LossNotDecreasing:num_steps=2",
        "--save-interval", "1",
        "--framework-profile",
        "--output-path", s3_url,
        "--name", "to-s3",
        "--plain",
        "--", "--steps", "12",
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout + finished.stderr
    job = f"{s3_url}/to-s3"
    lines = finished.stdout.splitlines()
    summary = lines[lines.index("Training job to-s3: Completed") :]
    assert "  LossNotDecreasing: NoIssuesFound" in summary
    assert f"  tensors:   {job}/debug-output" in summary
    [report_line] = [line for line in summary if line.startswith("Report: ")]
    assert report_line.startswith(f"Report: {job}/rule-output/ProfilerReport-")

    keys = files.list_files(job)
    steps = [f"debug-output/index/000000000/{step:012d}_worker_0.json" for step in range(12)]
    assert set(steps) <= set(keys)
    assert "debug-output/training_job_end.ts" in keys
    assert matching(keys, "profiler-output/system/incremental/", ".algo-1.json")
    assert matching(keys, "profiler-output/framework/pevents/", "_pythontimeline.json")
    assert matching(keys, "profiler-output/framework/pytorch/detailed_profiling/", ".json")
    status = json.loads(files.read_bytes(f"{job}/rule-output/LossNotDecreasing/status.json"))
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    assert files.list_files(f"{job}/rule-output/LossNotDecreasing", "evaluations.jsonl")
    report = report_line.removeprefix("Report: ")
    assert files.read_bytes(report).startswith(b"<!DOCTYPE html>")
    content = json.loads(files.read_bytes(report.removesuffix(".html") + ".json"))
    assert content["JobDirectory"] == job
    # The report found the debugging rule's status in the bucket.
    [row] = content["DebuggingRules"]["Rules"]
    assert (row["Rule"], row["Status"]) == ("LossNotDecreasing", "NoIssuesFound")

    # `trainprobe report` finds the job's outputs in the bucket and writes the report there.
    again = trainprobe(tmp_path, "report", "to-s3")
    assert again.returncode == 0, again.stderr
    assert f"report: {report}" in again.stdout.splitlines()

    # The job's working files are local; its outputs are not.
    local = tmp_path / "home" / "output" / "to-s3"
    assert "finished" in (local / "logs" / "training.log").read_text()
    assert (local / "config" / "launch.json").is_file()
    assert not (local / "debug-output").exists() and not (local / "rule-output").exists()

    description = described(tmp_path, "to-s3")
    assert description["OutputDataConfig"]["S3OutputPath"] == s3_url
    assert description["DebugHookConfig"]["S3OutputPath"] == s3_url
    assert description["ProfilerConfig"]["S3OutputPath"] == s3_url

    ours = create_trial(f"{job}/debug-output")
    assert ours.steps() == list(range(12))
    read = read_with_smdebug(f"{job}/debug-output")
    assert read["steps"] == ours.steps()
    assert sorted(read["values"]) == ours.tensor_names()
    for name, values in read["values"].items():
        for step, value in values.items():
            np.testing.assert_array_equal(np.asarray(value), ours.tensor(name).value(int(step)))


@pytest.mark.slow
def test_an_xgboost_run_writes_its_tensors_rules_and_report_to_the_bucket(
    tmp_path: Path, s3_url: str
) -> None:
    finished = trainprobe(
        tmp_path,
        "run",
        str(XGBOOST_TRAINING),
        "--rule", "LossNotDecreasing",
        "--rule", "CreateXgboostReport",
        "--save-interval", "1",
        "--no-profiler",
        "--output-path", s3_url,
        "--name", "xgboost-to-s3",
        "--plain",
        "--", "--rounds", "6",
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout + finished.stderr
    job = f"{s3_url}/xgboost-to-s3"
    rule_output = f"{job}/rule-output/CreateXgboostReport"
    content = json.loads(files.read_bytes(f"{rule_output}/xgboost_report.json"))
    assert content["Evaluation"]["Task"] == "binary"
    assert [rule["Rule"] for rule in content["Rules"]] == ["LossNotDecreasing"]
    assert files.size(f"{rule_output}/xgboost_report.html") > 1_000_000  # plotly inline
    trial = create_trial(f"{job}/debug-output")
    assert trial.steps() == list(range(6))
    assert described(tmp_path, "xgboost-to-s3")["DebugHookConfig"]["S3OutputPath"] == s3_url


@pytest.mark.slow
def test_a_create_training_job_request_writes_each_output_under_its_own_s3_root(
    store: JobStore, s3_url: str
) -> None:
    roots = {key: f"{s3_url}/{key}" for key in ("out", "tensors", "profiler", "tensorboard")}
    body = to(roots["out"], "api-to-s3")
    body["AlgorithmSpecification"]["ContainerArguments"] = ["--steps", "4"]
    body["DebugHookConfig"]["S3OutputPath"] = roots["tensors"]
    body["DebugRuleConfigurations"] = [rule("ExplodingTensor")]
    body["ProfilerConfig"] = {
        "S3OutputPath": roots["profiler"],
        "ProfilingIntervalInMilliseconds": 500,
    }
    body["TensorBoardOutputConfig"] = {"S3OutputPath": roots["tensorboard"]}
    create_training_job(body, store=store)
    # The runner finishes the monitor's last minute after the job's status is final.
    description = wait_for(
        store,
        "api-to-s3",
        lambda found: finished(found) and getattr(store.get("api-to-s3"), "runner_done", False),
        "the job's runner to end",
    )
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    assert rule_statuses(description) == {"ExplodingTensor": "NoIssuesFound"}
    assert description["OutputDataConfig"]["S3OutputPath"] == roots["out"]
    assert description["DebugHookConfig"]["S3OutputPath"] == roots["tensors"]
    assert description["ProfilerConfig"]["S3OutputPath"] == roots["profiler"]

    assert create_trial(f"{roots['tensors']}/api-to-s3/debug-output").steps() == [0, 1, 2, 3]
    system = files.list_files(f"{roots['profiler']}/api-to-s3/profiler-output/system")
    assert system and all(name.endswith(".algo-1.json") for name in system)
    status = files.read_bytes(f"{roots['out']}/api-to-s3/rule-output/ExplodingTensor/status.json")
    assert json.loads(status)["RuleEvaluationStatus"] == "NoIssuesFound"
    tensorboard = files.list_files(f"{roots['tensorboard']}/api-to-s3/tensorboard-output")
    # The steps of a plain training loop are TRAIN steps (the hook follows the training).
    assert any(name.startswith("TRAIN/events.out.tfevents.") for name in tensorboard)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def to(url: str, name: str) -> dict[str, Any]:
    """A request for a short PyTorch training whose outputs go under ``url``."""
    return request(name, Path("unused"), OutputDataConfig={"S3OutputPath": url})


def refusal(body: dict[str, Any], store: JobStore) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        create_training_job(body, store=store)
    assert store.names() == []
    return raised.value


def test_a_bucket_that_cannot_be_used_is_refused_at_creation(
    store: JobStore, tmp_path: Path, s3_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = "s3://no-such-bucket/" + s3_url.removeprefix("s3://").partition("/")[2]
    error = refusal(to(missing, "missing-bucket"), store)
    assert (error.field, error.value) == ("OutputDataConfig.S3OutputPath", missing)
    assert "no bucket 'no-such-bucket'" in error.allowed

    body = request("missing-profiler-bucket", tmp_path / "out")
    body["ProfilerConfig"] = {"S3OutputPath": missing, "ProfilingIntervalInMilliseconds": 500}
    error = refusal(body, store)
    assert (error.field, error.value) == ("ProfilerConfig.S3OutputPath", missing)
    assert not (tmp_path / "out").exists()

    files.write_atomic(f"{s3_url}/taken/debug-output/old.json", b"{}")
    error = refusal(to(s3_url, "taken"), store)
    assert error.field == "TrainingJobName" and "already holds files" in error.allowed

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed_port()}")
    error = refusal(to(s3_url, "no-endpoint"), store)
    assert (error.field, error.value) == ("OutputDataConfig.S3OutputPath", s3_url)
    assert "cannot be reached" in error.allowed and "AWS_ENDPOINT_URL" in error.allowed
