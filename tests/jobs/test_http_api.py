"""``trainprobe serve``: boto3's SageMaker client, signing with the server's key pair, runs jobs
through the JSON API."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from tests.jobs.api_calls import client, signed_call
from tests.jobs.job_helpers import request

from trainprobe.jobs import JobStore
from trainprobe.jobs.server.access_key import load_or_create


@pytest.fixture
def endpoint(store: JobStore) -> Iterator[str]:
    """``trainprobe serve --port 0`` running in the test's trainprobe home; its URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "trainprobe.cli.main", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline(), server.stdout.readline()]
        assert "serve-credentials" in lines[0], lines
        assert "http://127.0.0.1:" in lines[1], lines
        yield lines[1].split()[-1]
    finally:
        server.terminate()
        server.wait(timeout=30)


def _client(url: str) -> Any:
    """boto3, signing with the key pair the server created in the test's trainprobe home."""
    return client(url, load_or_create())


def _boto_request(name: str, out: Path, *arguments: str, **members: Any) -> dict[str, Any]:
    """A CreateTrainingJob request with what boto3 requires (a role, resources, a time limit,
    the hook's S3OutputPath)."""
    body = request(name, out, *arguments, **members)
    body["RoleArn"] = "arn:aws:iam::111122223333:role/local"
    body["DebugHookConfig"]["S3OutputPath"] = str(out)
    body["ResourceConfig"] = {
        "InstanceCount": 1,
        "InstanceType": "ml.m5.large",
        "VolumeSizeInGB": 1,
    }
    body["StoppingCondition"] = {"MaxRuntimeInSeconds": 3600}
    return body


def _wait(client: Any, name: str, statuses: tuple[str, ...]) -> dict[str, Any]:
    waiter_deadline = datetime.datetime.now() + datetime.timedelta(seconds=180)
    while True:
        description: dict[str, Any] = client.describe_training_job(TrainingJobName=name)
        if description["TrainingJobStatus"] in statuses:
            return description
        assert datetime.datetime.now() < waiter_deadline, description
        subprocess.run(["sleep", "0.3"], check=True)


def test_boto3_creates_describes_lists_updates_and_stops_jobs(
    endpoint: str, tmp_path: Path
) -> None:
    client = _client(endpoint)
    out = tmp_path / "out"
    created = client.create_training_job(**_boto_request("short", out, "--steps", "3"))
    assert created["TrainingJobArn"].endswith(":training-job/short")
    long = _boto_request("long", out, "--steps", "100000", "--sleep", "0.05")
    long["ProfilerConfig"] = {"ProfilingIntervalInMilliseconds": 500}
    client.create_training_job(**long)

    done = _wait(client, "short", ("Completed", "Failed", "Stopped"))
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    # Times travel as epoch seconds; boto3 turns them into aware datetimes.
    assert isinstance(done["CreationTime"], datetime.datetime)
    assert done["CreationTime"].tzinfo is not None
    assert done["TrainingEndTime"] >= done["TrainingStartTime"] >= done["CreationTime"]

    listed = client.list_training_jobs(SortBy="Name", SortOrder="Ascending")
    assert [job["TrainingJobName"] for job in listed["TrainingJobSummaries"]] == ["long", "short"]
    page = client.list_training_jobs(MaxResults=1, SortBy="Name", SortOrder="Descending")
    assert [job["TrainingJobName"] for job in page["TrainingJobSummaries"]] == ["short"]
    rest = client.list_training_jobs(
        MaxResults=1, SortBy="Name", SortOrder="Descending", NextToken=page["NextToken"]
    )
    assert [job["TrainingJobName"] for job in rest["TrainingJobSummaries"]] == ["long"]
    after = done["CreationTime"] - datetime.timedelta(seconds=1)
    assert (
        client.list_training_jobs(CreationTimeAfter=after, StatusEquals="Completed")[
            "TrainingJobSummaries"
        ][0]["TrainingJobName"]
        == "short"
    )

    _wait(client, "long", ("InProgress",))
    client.update_training_job(
        TrainingJobName="long", ProfilerConfig={"ProfilingIntervalInMilliseconds": 100}
    )
    running = client.describe_training_job(TrainingJobName="long")
    assert running["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] == 100
    client.stop_training_job(TrainingJobName="long")
    stopped = _wait(client, "long", ("Stopped", "Failed", "Completed"))
    assert stopped["TrainingJobStatus"] == "Stopped"


def test_errors_come_back_as_sagemakers_error_codes(endpoint: str, tmp_path: Path) -> None:
    client = _client(endpoint)
    with pytest.raises(ClientError) as missing:
        client.describe_training_job(TrainingJobName="no-such-job")
    assert missing.value.response["Error"]["Code"] == "ValidationException"
    assert "no-such-job" in missing.value.response["Error"]["Message"]
    assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400

    client.create_training_job(**_boto_request("twice", tmp_path / "out", "--steps", "1"))
    with pytest.raises(ClientError) as taken:
        client.create_training_job(**_boto_request("twice", tmp_path / "out", "--steps", "1"))
    assert taken.value.response["Error"]["Code"] == "ResourceInUse"

    bad = _boto_request(
        "bad-script", tmp_path / "out", "--steps", "1", script=tmp_path / "missing.py"
    )
    with pytest.raises(ClientError) as refused:
        client.create_training_job(**bad)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "missing.py" in refused.value.response["Error"]["Message"]
    _wait(client, "twice", ("Completed", "Failed", "Stopped"))

    status, headers, answer = signed_call(
        endpoint, "SageMaker.DeleteTrainingJob", {}, load_or_create()
    )
    assert status == 400
    assert answer["__type"] == headers["x-amzn-errortype"] == "UnknownOperationException"
    assert "SageMaker.CreateTrainingJob" in answer["message"]
