"""The HTTP application behind ``trainprobe serve``: who may call, what it may send, and how much.

Every request, whatever it holds, gets SageMaker's error JSON or the operation's answer:

1. The body is read within the request's time limit (``408 RequestTimeoutException``
   otherwise; the server gives the line and headers as long) and kept up to the largest body
   allowed (``413 RequestEntityTooLargeException`` beyond it); what is refused is still read to
   its end, so the client always reads the answer.
2. ``Host`` must name the address served (``403 AccessDeniedException``): a web page that points
   its own domain at 127.0.0.1 (DNS rebinding) sends its domain there.
3. Only ``POST /`` is an API call (``400 UnknownOperationException``).
4. The request must be signed with the server's key pair (AWS Signature Version 4;
   ``MissingAuthenticationTokenException``, ``UnrecognizedClientException``,
   ``InvalidSignatureException``, ``IncompleteSignatureException``).
5. ``Content-Type`` must be ``application/x-amz-json-1.1`` (``415 UnsupportedMediaTypeException``).
6. At most ``largest_queue`` requests are open at once (``400 ThrottlingException``, which boto3
   retries), and at most ``workers`` operations run at once; the others wait their turn.

The operation itself runs in a worker thread (``trainprobe.jobs.server.http_api.handle_call``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import anyio.to_thread
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from trainprobe.config.request_json import MAX_REQUEST_BYTES
from trainprobe.jobs.server.access_key import AccessKey
from trainprobe.jobs.server.http_api import CONTENT_TYPE, ApiAnswer, error_answer, handle_call
from trainprobe.jobs.server.request_signature import SignatureRefused, verify_signature
from trainprobe.jobs.store import JobStore

__all__ = ["ApiLimits", "JobApi", "served_hosts"]

_log = logging.getLogger("trainprobe.serve")


@dataclass(frozen=True)
class ApiLimits:
    """How long and how much one request may take, and how many may be served at once."""

    request_seconds: float = 10.0
    """For a request's line and headers (from its first byte), and again for its body."""
    largest_body: int = MAX_REQUEST_BYTES
    """Bytes; SageMaker's largest requests are a few tens of KiB (a request file has the same
    limit)."""
    workers: int = 8
    """Operations running at once."""
    largest_queue: int = 1024
    """Requests open at once (reading, waiting or running); beyond it ThrottlingException."""


def served_hosts(address: str, port: int) -> frozenset[str] | None:
    """The ``Host`` values a server on ``address``:``port`` accepts, in lower case; None where
    any IP address with that port is accepted (a wildcard address such as 0.0.0.0)."""
    ip = ipaddress.ip_address(address)
    if ip.is_unspecified:
        return None
    shown = f"[{ip}]" if ip.version == 6 else str(ip)
    names = [shown, "localhost"] if ip.is_loopback else [shown]
    hosts = {f"{name}:{port}" for name in names}
    if port == 80:
        hosts.update(names)
    return frozenset(host.lower() for host in hosts)


def _host_is_served(host: str, served: frozenset[str] | None, port: int) -> bool:
    host = host.strip().lower()
    if served is not None:
        return host in served
    name, _, host_port = host.rpartition(":")
    if not name or host_port != str(port):
        return False
    try:
        ipaddress.ip_address(name.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return True


def _media_type(headers: Sequence[tuple[str, str]]) -> str:
    values = [value for name, value in headers if name == "content-type"]
    return values[0].split(";")[0].strip().lower() if len(values) == 1 else ""


class JobApi:
    """The ASGI application: SageMaker's job operations for callers holding ``key``, on the
    server at ``address``:``port``."""

    def __init__(
        self,
        *,
        key: AccessKey,
        store: JobStore,
        cwd: str,
        address: str,
        port: int,
        limits: ApiLimits | None = None,
    ) -> None:
        self.key = key
        self.store = store
        self.cwd = cwd
        self.port = port
        self.limits = limits or ApiLimits()
        self._served = served_hosts(address, port)
        self._shown_hosts = " or ".join(sorted(self._served or {f"<IP address>:{port}"}))
        self._workers = anyio.CapacityLimiter(self.limits.workers)
        self._open = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        self._open += 1
        try:
            answer, close = await self._answer(request)
        except ClientDisconnect:
            return
        except Exception as error:  # a bug here still gets SageMaker's answer, and is logged
            _log.exception("the request could not be answered")
            message = f"trainprobe failed unexpectedly ({type(error).__name__}); see its log"
            answer, close = error_answer(500, "InternalFailure", message), True
        finally:
            self._open -= 1
        headers = {"x-amzn-RequestId": os.urandom(16).hex()}
        if answer.error is not None:
            headers["x-amzn-ErrorType"] = answer.error
        if close:
            headers["Connection"] = "close"
        response = Response(answer.payload(), answer.status, headers, media_type=CONTENT_TYPE)
        await response(scope, receive, send)

    async def _read_body(self, request: Request) -> tuple[bytes, int, bool]:
        """The body (empty when over the limit), its size, and whether it ended in time."""
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.limits.request_seconds) as deadline:
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.limits.largest_body:
                    chunks.clear()
                else:
                    chunks.append(chunk)
        return b"".join(chunks), size, not deadline.cancelled_caught

    async def _answer(self, request: Request) -> tuple[ApiAnswer, bool]:
        """The answer, and whether to close the connection after it."""
        throttled = self._open > self.limits.largest_queue
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in request.scope["headers"]
        ]
        declared = next((value for name, value in headers if name == "content-length"), "0")
        body, size, in_time = await self._read_body(request)
        largest = self.limits.largest_body
        if size > largest or (declared.isdigit() and int(declared) > largest):
            message = f"the body is over {largest} bytes; SageMaker's requests are far smaller"
            return error_answer(413, "RequestEntityTooLargeException", message), True
        if not in_time:
            message = f"the request's body did not arrive within {self.limits.request_seconds:g} s"
            return error_answer(408, "RequestTimeoutException", message), True
        hosts = [value for name, value in headers if name == "host"]
        if len(hosts) != 1 or not _host_is_served(hosts[0], self._served, self.port):
            shown = f"Host {hosts[0]!r} is" if len(hosts) == 1 else f"{len(hosts)} Host headers are"
            message = (
                f"{shown} not the address this server serves ({self._shown_hosts}); "
                "refused, so that a web page cannot reach it through its own domain (DNS "
                "rebinding)"
            )
            return error_answer(403, "AccessDeniedException", message), False
        raw_path = request.scope.get("raw_path") or request.scope["path"].encode()
        path = raw_path.decode("latin-1")
        if request.scope["query_string"]:
            path += "?" + request.scope["query_string"].decode("latin-1")
        if request.method != "POST" or path != "/":
            message = f"{request.method} {path}: expected POST / (AWS JSON 1.1, as boto3 sends)"
            return error_answer(400, "UnknownOperationException", message), False
        try:
            verify_signature(request.method, path, headers, body, self.key)
        except SignatureRefused as refused:
            return error_answer(refused.status, refused.error_code, str(refused)), False
        media_type = _media_type(headers)
        if media_type != CONTENT_TYPE:
            shown = repr(media_type) if media_type else "(missing)"
            message = f"Content-Type {shown} is not accepted; expected {CONTENT_TYPE}"
            return error_answer(415, "UnsupportedMediaTypeException", message), False
        if throttled:
            message = f"more than {self.limits.largest_queue} requests are open; try again"
            return error_answer(400, "ThrottlingException", message), False
        targets = [value for name, value in headers if name == "x-amz-target"]
        target = targets[0].strip() if len(targets) == 1 else ""
        answer = await anyio.to_thread.run_sync(
            handle_call, target, body, self.store, self.cwd, limiter=self._workers
        )
        return answer, False
