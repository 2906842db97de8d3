"""``trainprobe serve`` answers only the callers it should: signed with its key pair, at the
address it serves, in SageMaker's protocol; nothing else runs a job."""

from __future__ import annotations

import datetime
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError
from tests.jobs.api_calls import CONTENT_TYPE, call, client, sign, signed_call
from tests.jobs.job_helpers import request

from trainprobe.jobs import JobStore
from trainprobe.jobs.server.access_key import AccessKey, default_path, load_or_create
from trainprobe.jobs.server.api_server import JobApiServer


def _create_body(tmp_path: Path) -> bytes:
    """A CreateTrainingJob that would run a training, had the server accepted it."""
    return json.dumps(request("intruder", tmp_path / "out", "--steps", "1")).encode()


def _error_code(call_: Any) -> str:
    with pytest.raises(ClientError) as refused:
        call_()
    code: str = refused.value.response["Error"]["Code"]
    assert 400 <= refused.value.response["ResponseMetadata"]["HTTPStatusCode"] < 500
    return code


def test_the_key_pair_is_kept_in_a_file_only_the_user_can_read(api_server: JobApiServer) -> None:
    path = default_path()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_or_create() == api_server.key  # the next start uses the same key
    text = Path(path).read_text()
    assert text.startswith("[trainprobe]\n")
    assert api_server.key.access_key_id in text
    assert api_server.key.secret_access_key in text


def test_boto3_with_the_trainprobe_profile_works(
    api_server: JobApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", default_path())
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    session = boto3.Session(profile_name="trainprobe")
    sagemaker = session.client("sagemaker", endpoint_url=api_server.url, region_name="us-east-1")
    assert sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_a_request_from_a_foreign_host_is_refused(
    api_server: JobApiServer, store: JobStore, tmp_path: Path
) -> None:
    # What a browser sends after its own domain was pointed at 127.0.0.1 (DNS rebinding);
    # signed, even, so the Host check alone refuses it.
    body = _create_body(tmp_path)
    rebound = f"http://rebound.example:{api_server.port}"
    headers = sign(rebound, "SageMaker.CreateTrainingJob", body, api_server.key)
    status, got, answer = call(api_server.url, body, headers)
    assert status == 403
    assert answer["__type"] == got["x-amzn-errortype"] == "AccessDeniedException"
    assert "rebound.example" in answer["message"]
    assert store.query() == []

    for host in (f"localhost:{api_server.port}", f"127.0.0.1:{api_server.port}"):
        served = sign(f"http://{host}", "SageMaker.ListTrainingJobs", b"{}", api_server.key)
        assert call(api_server.url, b"{}", served)[0] == 200


def test_unsigned_requests_are_refused(
    api_server: JobApiServer, store: JobStore, tmp_path: Path
) -> None:
    body = _create_body(tmp_path)
    headers = {
        "Host": f"127.0.0.1:{api_server.port}",
        "Content-Type": CONTENT_TYPE,
        "X-Amz-Target": "SageMaker.CreateTrainingJob",
    }
    status, got, answer = call(api_server.url, body, headers)
    assert status == 403
    assert answer["__type"] == got["x-amzn-errortype"] == "MissingAuthenticationTokenException"

    unsigned = boto3.client(
        "sagemaker",
        endpoint_url=api_server.url,
        region_name="us-east-1",
        config=Config(signature_version=UNSIGNED),
    )
    code = _error_code(lambda: unsigned.list_training_jobs())
    assert code == "MissingAuthenticationTokenException"
    assert store.query() == []


def test_wrongly_signed_requests_are_refused(
    api_server: JobApiServer, store: JobStore, tmp_path: Path
) -> None:
    key = api_server.key
    wrong_secret = AccessKey(key.access_key_id, key.secret_access_key + "x")
    wrong_id = AccessKey("TPAKAAAAAAAAAAAAAAAA", key.secret_access_key)
    create = request("intruder", tmp_path / "out", "--steps", "1")
    create["RoleArn"] = "arn:aws:iam::111122223333:role/local"
    create["ResourceConfig"] = {
        "InstanceCount": 1,
        "InstanceType": "ml.m5.large",
        "VolumeSizeInGB": 1,
    }
    create["StoppingCondition"] = {"MaxRuntimeInSeconds": 60}
    create["DebugHookConfig"]["S3OutputPath"] = str(tmp_path / "out")
    assert (
        _error_code(lambda: client(api_server.url, wrong_secret).create_training_job(**create))
        == "InvalidSignatureException"
    )
    assert (
        _error_code(lambda: client(api_server.url, wrong_id).create_training_job(**create))
        == "UnrecognizedClientException"
    )

    body = _create_body(tmp_path)
    target = "SageMaker.CreateTrainingJob"
    tampered = sign(api_server.url, target, b'{"TrainingJobName": "harmless"}', key)
    stale = sign(
        api_server.url,
        target,
        body,
        key,
        when=datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=20),
    )
    early = sign(
        api_server.url,
        target,
        body,
        key,
        when=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=20),
    )
    other_service = sign(api_server.url, target, body, key, service="s3")
    # Signed, but saying the payload is not: the body could be anything.
    unsigned_payload = sign(
        api_server.url,
        target,
        b"",
        key,
        headers={
            "Content-Type": CONTENT_TYPE,
            "X-Amz-Target": target,
            "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD",
        },
    )
    for headers, words in (
        (tampered, "does not match"),
        (stale, "Signature expired"),
        (early, "not yet current"),
        (other_service, "sagemaker"),
        (unsigned_payload, "does not match"),
    ):
        status, got, answer = call(api_server.url, body, headers)
        assert status == 403, answer
        assert answer["__type"] == got["x-amzn-errortype"] == "InvalidSignatureException"
        assert words in answer["message"]
    assert store.query() == []


def test_only_sagemakers_content_type_is_accepted(api_server: JobApiServer) -> None:
    target = "SageMaker.ListTrainingJobs"
    headers = {"Content-Type": "text/plain", "X-Amz-Target": target}
    status, got, answer = call(
        api_server.url, b"{}", sign(api_server.url, target, b"{}", api_server.key, headers=headers)
    )
    assert status == 415
    assert answer["__type"] == got["x-amzn-errortype"] == "UnsupportedMediaTypeException"
    assert "application/x-amz-json-1.1" in answer["message"]
    assert signed_call(api_server.url, target, {}, api_server.key)[0] == 200


def test_serve_listens_on_the_loopback_address_by_default(api_server: JobApiServer) -> None:
    assert api_server.host == "127.0.0.1"
    assert api_server.url == f"http://127.0.0.1:{api_server.port}"


def _serve_once() -> subprocess.CompletedProcess[str]:
    """``trainprobe serve`` run as a user would, for the tests where it must refuse to start."""
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", "serve", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


def test_serve_refuses_a_key_file_others_can_read(store: JobStore) -> None:
    load_or_create()
    os.chmod(default_path(), 0o644)
    ran = _serve_once()
    assert ran.returncode == 1
    assert "can be read by others" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_serve_refuses_a_key_file_it_cannot_read_with_a_message(store: JobStore) -> None:
    load_or_create()
    Path(default_path()).write_text("[default]\naws_access_key_id = x\n")
    ran = _serve_once()
    assert ran.returncode == 1
    assert "[trainprobe] section" in ran.stderr
    assert "Traceback" not in ran.stderr
