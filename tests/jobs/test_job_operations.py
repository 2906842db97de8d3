"""The job operations' answers that need no training: refusals, listing, settling lost jobs.

Jobs here are written straight into the job store (as their runner would have left them), so
the operations are checked against every state a job can be in, quickly.
"""

from __future__ import annotations

import datetime
import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from job_helpers import FINAL, request, rule, wait_for

from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.jobs import (
    JobNameInUse,
    JobNotFound,
    JobRecord,
    JobStateError,
    JobStore,
    create_training_job,
    describe_training_job,
    list_training_jobs,
    stop_training_job,
    update_training_job,
)


def stored(
    store: JobStore, tmp_path: Path, name: str, status: str = "Completed", created: float = 100.0
) -> JobRecord:
    job = JobRecord(
        name=name,
        arn=f"arn:aws:sagemaker:local:000000000000:training-job/{name}",
        request={"TrainingJobName": name},
        job_dir=str(tmp_path / "out" / name),
        status=status,
        secondary_status=status if status != "InProgress" else "Training",
        creation_time=created,
        last_modified_time=created + 1,
        training_start_time=created,
        runner_done=status != "InProgress",
    )
    store.insert(job)
    return job


@pytest.mark.parametrize(
    ("members", "field", "says"),
    [
        (
            {"AlgorithmSpecification": {"TrainingInputMode": "File"}},
            "AlgorithmSpecification",
            "entry point",
        ),
        (
            {"OutputDataConfig": {"S3OutputPath": "gs://bucket/out"}},
            "OutputDataConfig.S3OutputPath",
            "local",
        ),
        ({"ResourceConfig": {"InstanceCount": 0}}, "ResourceConfig.InstanceCount", "from 1"),
        (
            {"StoppingCondition": {"MaxRuntimeInSeconds": "1h"}},
            "MaxRuntimeInSeconds",
            "whole number",
        ),
        ({"DebugRuleConfigurations": [rule("ExplodingTensr")]}, "DebugRuleConfigurations[0]", ""),
        ({"TrainingJobName": "no_underscores"}, "TrainingJobName", "hyphens"),
    ],
)
def test_a_request_that_cannot_run_is_refused_before_anything_starts(
    store: JobStore, tmp_path: Path, members: dict[str, Any], field: str, says: str
) -> None:
    body = request("refused", tmp_path / "out", **members)
    with pytest.raises(ConfigError) as raised:
        create_training_job(body, store=store)
    found = raised.value.problems()
    assert any(field in problem.field and says in problem.allowed for problem in found), found
    assert store.names() == []
    assert not (tmp_path / "out").exists()


def test_a_name_in_use_or_an_output_with_files_is_refused(store: JobStore, tmp_path: Path) -> None:
    stored(store, tmp_path, "taken")
    with pytest.raises(JobNameInUse):
        create_training_job(request("taken", tmp_path / "out"), store=store)
    (tmp_path / "out" / "fresh" / "debug-output").mkdir(parents=True)
    (tmp_path / "out" / "fresh" / "debug-output" / "old.json").write_text("{}")
    with pytest.raises(ConfigError) as raised:
        create_training_job(request("fresh", tmp_path / "out"), store=store)
    assert "already holds files" in raised.value.allowed
    assert store.get("fresh") is None


def test_describing_an_unknown_job_names_the_nearest(store: JobStore, tmp_path: Path) -> None:
    stored(store, tmp_path, "mnist-1")
    with pytest.raises(JobNotFound) as raised:
        describe_training_job({"TrainingJobName": "mnist-2"}, store=store)
    assert raised.value.suggestion == "mnist-1"
    assert raised.value.error_code == "ValidationException"


def names(response: dict[str, Any]) -> list[str]:
    return [summary["TrainingJobName"] for summary in response["TrainingJobSummaries"]]


def test_listing_filters_sorts_and_pages(store: JobStore, tmp_path: Path) -> None:
    for index, (name, status) in enumerate(
        [("b-job", "Completed"), ("a-job", "Failed"), ("c-run", "Stopped"), ("d-job", "Completed")]
    ):
        stored(store, tmp_path, name, status, created=1000.0 + index)
    assert names(list_training_jobs({}, store=store)) == ["b-job", "a-job", "c-run", "d-job"]
    assert names(list_training_jobs({"SortOrder": "Descending"}, store=store)) == [
        "d-job",
        "c-run",
        "a-job",
        "b-job",
    ]
    assert names(list_training_jobs({"SortBy": "Name"}, store=store)) == [
        "a-job",
        "b-job",
        "c-run",
        "d-job",
    ]
    assert names(list_training_jobs({"NameContains": "JOB"}, store=store)) == [
        "b-job",
        "a-job",
        "d-job",
    ]
    assert names(list_training_jobs({"StatusEquals": "Completed"}, store=store)) == [
        "b-job",
        "d-job",
    ]
    after = datetime.datetime.fromtimestamp(1001.5, tz=datetime.timezone.utc)
    assert names(list_training_jobs({"CreationTimeAfter": after}, store=store)) == [
        "c-run",
        "d-job",
    ]
    first = list_training_jobs({"MaxResults": 3}, store=store)
    assert names(first) == ["b-job", "a-job", "c-run"]
    stored(store, tmp_path, "e-job", created=time.time())  # created meanwhile: a later page
    second = list_training_jobs({"MaxResults": 3, "NextToken": first["NextToken"]}, store=store)
    assert names(second) == ["d-job"]
    assert "NextToken" not in second
    summary = first["TrainingJobSummaries"][0]
    assert summary["CreationTime"] == datetime.datetime.fromtimestamp(
        1000.0, tz=datetime.timezone.utc
    )
    assert set(summary) == {
        "TrainingJobName",
        "TrainingJobArn",
        "CreationTime",
        "LastModifiedTime",
        "TrainingJobStatus",
        "SecondaryStatus",
    }


@pytest.mark.parametrize(
    ("members", "field"),
    [
        ({"SortBy": "Nmae"}, "SortBy"),
        ({"StatusEquals": "Running"}, "StatusEquals"),
        ({"MaxResults": 1000}, "MaxResults"),
        ({"NextToken": "not-a-token"}, "NextToken"),
        ({"CreationTimeAfter": "yesterday"}, "CreationTimeAfter"),
        ({"NameContain": "x"}, "NameContain"),
    ],
)
def test_a_bad_listing_request_is_refused(
    store: JobStore, members: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        list_training_jobs(members, store=store)
    assert raised.value.field == field


def test_a_finished_job_cannot_be_stopped_or_updated(store: JobStore, tmp_path: Path) -> None:
    stored(store, tmp_path, "done")
    with pytest.raises(JobStateError) as raised:
        stop_training_job({"TrainingJobName": "done"}, store=store)
    assert "Completed" in raised.value.allowed
    with pytest.raises(JobStateError):
        update_training_job(
            {"TrainingJobName": "done", "ProfilerConfig": {"DisableProfiler": True}}, store=store
        )


def test_an_update_merges_the_profiler_config_and_adds_new_profiler_rules(
    store: JobStore, tmp_path: Path
) -> None:
    job = stored(store, tmp_path, "running", status="InProgress")
    store.update("running", profiler_config={"ProfilingIntervalInMilliseconds": 1000})
    (Path(job.job_dir) / "config").mkdir(parents=True)
    with pytest.raises(ConfigErrors) as raised:
        update_training_job(
            {
                "TrainingJobName": "running",
                "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 250},
            },
            store=store,
        )
    assert raised.value.problems()[0].field == "ProfilerConfig.ProfilingIntervalInMilliseconds"

    report = {
        "RuleConfigurationName": "ProfilerReport",
        "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
        "RuleParameters": {"rule_to_invoke": "ProfilerReport"},
    }
    update_training_job(
        {
            "TrainingJobName": "running",
            "ProfilerConfig": {"DisableProfiler": True},
            "ProfilerRuleConfigurations": [report],
        },
        store=store,
    )
    written = json.loads((Path(job.job_dir) / "config" / "profilerconfig.json").read_text())
    assert written == {"DisableProfiler": True, "ProfilingIntervalInMilliseconds": 1000}
    described = describe_training_job({"TrainingJobName": "running"}, store=store)
    assert described["ProfilingStatus"] == "Disabled"
    assert described["ProfilerRuleConfigurations"] == [report]
    # The job's runner starts its evaluator (tests/jobs/test_update_profiler_rules.py).
    [status] = described["ProfilerRuleEvaluationStatuses"]
    assert status["RuleEvaluationStatus"] == "InProgress"
    with pytest.raises(ConfigErrors):  # the same rule name twice
        update_training_job(
            {"TrainingJobName": "running", "ProfilerRuleConfigurations": [report]}, store=store
        )


def test_a_job_whose_runner_died_is_failed_by_the_next_describe(
    store: JobStore, tmp_path: Path
) -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    stored(store, tmp_path, "lost", status="InProgress")
    store.update(
        "lost", runner_pid=ended.pid, runner_host=socket.gethostname(), heartbeat_time=time.time()
    )
    described = describe_training_job({"TrainingJobName": "lost"}, store=store)
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == ("Failed", "Failed")
    assert f"the job runner (process {ended.pid}" in described["FailureReason"]
    assert "ended before the job did" in described["FailureReason"]
    assert "TrainingEndTime" in described


def test_a_job_whose_runner_stopped_beating_is_failed(store: JobStore, tmp_path: Path) -> None:
    stored(store, tmp_path, "silent", status="InProgress")
    store.update("silent", runner_pid=1, runner_host="another-host", heartbeat_time=1000.0)
    described = describe_training_job({"TrainingJobName": "silent"}, store=store)
    assert described["TrainingJobStatus"] == "Failed"
    assert "has not reported since 1970-01-01T00:16:40+00:00" in described["FailureReason"]
    assert list_training_jobs({"StatusEquals": "InProgress"}, store=store) == {
        "TrainingJobSummaries": []
    }


@pytest.mark.slow
def test_a_job_stopped_right_after_its_creation_ends_stopped(
    store: JobStore, tmp_path: Path
) -> None:
    # The stop wakes the runner with a signal, which may come before the runner is ready for it.
    for attempt in range(3):
        name = f"stopped-at-once-{attempt}"
        create_training_job(request(name, tmp_path / "out", "--steps", "500"), store=store)
        stop_training_job({"TrainingJobName": name}, store=store)
        description = wait_for(
            store, name, lambda d: d["TrainingJobStatus"] in FINAL, "the job to end", 120.0
        )
        assert description["TrainingJobStatus"] == "Stopped", description
