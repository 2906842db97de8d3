"""The job operations in SageMaker's JSON protocol: one call's target and body in, its answer out.

SageMaker's API is AWS JSON 1.1: every call is a ``POST /`` whose ``X-Amz-Target`` header names
the operation (``SageMaker.CreateTrainingJob``) and whose body is the request as a JSON object
(``Content-Type: application/x-amz-json-1.1``). The answer is the response as JSON, times as
seconds since the epoch; an error is a 4xx (500 for trainprobe's own failure) with ``{"__type":
<error name>, "message": ...}`` and the name again in the ``x-amzn-ErrorType`` header, which a
client turns into its error code (``ValidationException``, ``ResourceInUse``).

Every input gets such an answer: an unknown target, a body that
``trainprobe.config.request_json.parse_request`` refuses (empty, not UTF-8, not JSON, nested too
deep, not an object: a SerializationException), and whatever an operation raises. The transport
(authentication, ``Host``, limits) is ``trainprobe.jobs.server.api_app``'s.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.request_json import parse_request
from trainprobe.errors import TrainprobeError
from trainprobe.jobs.operations.control import stop_training_job, update_training_job
from trainprobe.jobs.operations.create import create_training_job
from trainprobe.jobs.operations.describe import describe_training_job
from trainprobe.jobs.operations.listing import list_training_jobs
from trainprobe.jobs.store import JobStore

__all__ = [
    "CONTENT_TYPE",
    "OPERATIONS",
    "TARGET_PREFIX",
    "ApiAnswer",
    "error_answer",
    "handle_call",
    "to_json_protocol",
]

CONTENT_TYPE = "application/x-amz-json-1.1"
TARGET_PREFIX = "SageMaker."

_log = logging.getLogger("trainprobe.serve")

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


@dataclass(frozen=True)
class ApiAnswer:
    """An HTTP status and its JSON body; ``error`` is the error name, for the
    ``x-amzn-ErrorType`` header (None for a success)."""

    status: int
    body: dict[str, Any]
    error: str | None = None

    def payload(self) -> bytes:
        """The body as the bytes sent."""
        return json.dumps(self.body).encode()


def error_answer(status: int, name: str, message: str) -> ApiAnswer:
    """SageMaker's error answer: ``{"__type": name, "message": message}`` with ``status``."""
    return ApiAnswer(status, {"__type": name, "message": message}, name)


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


def _failure(error: BaseException) -> ApiAnswer:
    """The answer for what an operation raised."""
    if isinstance(error, ConfigErrors):
        codes = {getattr(item, "error_code", "ValidationException") for item in error}
        return error_answer(
            400, codes.pop() if len(codes) == 1 else "ValidationException", str(error)
        )
    if isinstance(error, ConfigError):
        return error_answer(400, getattr(error, "error_code", "ValidationException"), str(error))
    if isinstance(error, RecursionError):
        return error_answer(400, "ValidationException", "the request nests too deep to process")
    if isinstance(error, TrainprobeError | OSError):
        _log.error("the operation failed: %s", error)
        return error_answer(500, "InternalFailure", f"trainprobe could not do it: {error}")
    _log.exception("the operation failed unexpectedly")
    return error_answer(
        500,
        "InternalFailure",
        f"trainprobe failed unexpectedly ({type(error).__name__}: {error}); the server's log "
        "has the details; please report it",
    )


def handle_call(target: str, body: bytes, store: JobStore, cwd: str) -> ApiAnswer:
    """The answer to one call: ``target`` is the ``X-Amz-Target`` header, ``body`` the request's
    bytes. It never raises: any failure becomes SageMaker's error answer."""
    operation_name = target.removeprefix(TARGET_PREFIX)
    operation = OPERATIONS.get(operation_name) if target.startswith(TARGET_PREFIX) else None
    if operation is None:
        served = ", ".join(f"{TARGET_PREFIX}{name}" for name in OPERATIONS)
        shown = repr(target) if target else "(missing)"
        return error_answer(
            400, "UnknownOperationException", f"X-Amz-Target {shown}: expected one of {served}"
        )
    try:
        request = parse_request(body, source="body")
    except ConfigError as error:
        return error_answer(400, "SerializationException", str(error))
    try:
        answer = ApiAnswer(200, to_json_protocol(operation(request, store, cwd)))
        answer.payload()  # a response JSON cannot carry is trainprobe's failure, answered here
    except Exception as error:
        return _failure(error)
    return answer
