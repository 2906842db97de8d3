"""The job operations over HTTP, in SageMaker's JSON protocol, for boto3 and the AWS CLI.

SageMaker's API is AWS JSON 1.1: every call is a ``POST /`` whose ``X-Amz-Target`` header names
the operation (``SageMaker.CreateTrainingJob``) and whose body is the request as JSON
(``Content-Type: application/x-amz-json-1.1``). The answer is the response as JSON, times as
seconds since the epoch; an error is status 400 with ``{"__type": <error name>, "message":
...}``, the name a client turns into its error code (``ValidationException``, ``ResourceInUse``).
So a boto3 client pointed at the server runs jobs here::

    boto3.client("sagemaker", endpoint_url="http://127.0.0.1:8642", region_name="us-east-1",
                 aws_access_key_id="x", aws_secret_access_key="x").describe_training_job(
                     TrainingJobName="mnist-1")

The server listens on 127.0.0.1 only and does not check signatures: it runs scripts as the
user who started it, so it must not be reachable from other machines. Relative paths in a
request are taken from the directory the server was started in.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.jobs.control import stop_training_job, update_training_job
from trainprobe.jobs.describe import describe_training_job
from trainprobe.jobs.launcher import create_training_job
from trainprobe.jobs.listing import list_training_jobs
from trainprobe.jobs.store import JobStore

__all__ = ["LOCALHOST", "OPERATIONS", "JobApiServer", "handle_call", "to_json_protocol"]

LOCALHOST = "127.0.0.1"
CONTENT_TYPE = "application/x-amz-json-1.1"
TARGET_PREFIX = "SageMaker."
_LARGEST_BODY = 16 * 1024 * 1024

Operation = Callable[[Mapping[str, Any], JobStore, str], dict[str, Any]]

OPERATIONS: dict[str, Operation] = {
    "CreateTrainingJob": lambda request, store, cwd: create_training_job(
        request, store=store, cwd=cwd
    ),
    "DescribeTrainingJob": lambda request, store, cwd: describe_training_job(request, store=store),
    "ListTrainingJobs": lambda request, store, cwd: list_training_jobs(request, store=store),
    "UpdateTrainingJob": lambda request, store, cwd: update_training_job(request, store=store),
    "StopTrainingJob": lambda request, store, cwd: stop_training_job(request, store=store),
}
"""The operations served, by the name in ``X-Amz-Target``."""


def to_json_protocol(value: Any) -> Any:
    """``value`` with its datetimes as seconds since the epoch, as the JSON protocol sends
    times."""
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if isinstance(value, Mapping):
        return {key: to_json_protocol(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_protocol(item) for item in value]
    return value


def _error(name: str, message: str) -> tuple[int, dict[str, Any]]:
    return 400, {"__type": name, "message": message}


def handle_call(target: str, body: bytes, store: JobStore, cwd: str) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON answer for one call: ``target`` is the ``X-Amz-Target``
    header, ``body`` the request's bytes."""
    operation_name = target.removeprefix(TARGET_PREFIX)
    operation = OPERATIONS.get(operation_name) if target.startswith(TARGET_PREFIX) else None
    if operation is None:
        served = ", ".join(f"{TARGET_PREFIX}{name}" for name in OPERATIONS)
        return _error("UnknownOperationException", f"X-Amz-Target {target!r}: expected {served}")
    try:
        request = json.loads(body or b"{}")
    except ValueError as error:
        return _error("SerializationException", f"the body is not JSON: {error}")
    if not isinstance(request, dict):
        return _error("SerializationException", "the body must be a JSON object")
    try:
        response = operation(request, store, cwd)
    except ConfigErrors as errors:
        codes = {getattr(error, "error_code", "ValidationException") for error in errors}
        name = codes.pop() if len(codes) == 1 else "ValidationException"
        return _error(name, str(errors))
    except ConfigError as error:
        return _error(getattr(error, "error_code", "ValidationException"), str(error))
    return 200, to_json_protocol(response)


class _Handler(BaseHTTPRequestHandler):
    server: JobApiServer
    protocol_version = "HTTP/1.1"

    def _answer(self, status: int, data: Mapping[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-amzn-RequestId", os.urandom(16).hex())
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if self.path.split("?")[0] != "/" or length > _LARGEST_BODY:
            self._answer(*_error("ValidationException", "expected POST / with a JSON body"))
            return
        body = self.rfile.read(length)
        target = self.headers.get("X-Amz-Target", "")
        self._answer(*handle_call(target, body, self.server.store, self.server.cwd))

    def do_GET(self) -> None:
        self._answer(*_error("UnknownOperationException", "expected POST / (AWS JSON 1.1)"))

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)


class JobApiServer(ThreadingHTTPServer):
    """The HTTP server: on 127.0.0.1 at ``port`` (0: any free port, see ``port``)."""

    daemon_threads = True

    def __init__(
        self,
        port: int = 0,
        *,
        store: JobStore | None = None,
        cwd: str | None = None,
        verbose: bool = False,
    ) -> None:
        self.store = store if store is not None else JobStore()
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.verbose = verbose
        super().__init__((LOCALHOST, port), _Handler)

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        """The endpoint URL to give a client."""
        return f"http://{LOCALHOST}:{self.port}"
