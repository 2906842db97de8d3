"""The server behind ``trainprobe serve``: uvicorn serving ``JobApi`` on one address.

It binds and listens first (so a busy port is an error at once, and port 0 has its number), then
lets uvicorn serve it with a listen backlog of 2048, a keep-alive of 5 s and a graceful shutdown
that lets open requests finish (10 s at most). uvicorn leaves one thing open that matters here: a
client that sends half a request line or headers and waits. The protocol below gives each request
``request_seconds`` from its first byte (and a new connection as long to start one); then it
answers ``408 RequestTimeoutException`` and closes. A request that is not HTTP at all gets
``400 ValidationException`` in SageMaker's error JSON, not uvicorn's text.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import threading
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from trainprobe.jobs.server.access_key import AccessKey, load_or_create
from trainprobe.jobs.server.api_app import ApiLimits, JobApi
from trainprobe.jobs.server.http_api import CONTENT_TYPE
from trainprobe.jobs.store import JobStore

__all__ = [
    "BACKLOG",
    "LOCALHOST",
    "JobApiServer",
    "ServerInThread",
    "listening_socket",
    "server_config",
]

LOCALHOST = "127.0.0.1"
BACKLOG = 2048
_KEEP_ALIVE_SECONDS = 5
_GRACEFUL_SHUTDOWN_SECONDS = 10
_LARGEST_HEAD = 32 * 1024
"""Bytes of request line and headers (h11 refuses more, as invalid HTTP)."""


def _raw_error(status: str, name: str, message: str) -> bytes:
    """A whole HTTP answer carrying SageMaker's error JSON, for a connection about to close."""
    body = json.dumps({"__type": name, "message": message}).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\n"
        f"Content-Length: {len(body)}\r\nx-amzn-ErrorType: {name}\r\n"
        f"x-amzn-RequestId: {os.urandom(16).hex()}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class ServerInThread:
    """What trainprobe's servers share: uvicorn ``_server`` serving ``_socket`` in the calling
    thread (``serve_forever``) or in a background one (``start`` and ``stop``)."""

    _server: uvicorn.Server
    _socket: socket.socket
    _thread: threading.Thread | None = None
    thread_name = "trainprobe-server"

    def serve_forever(self) -> None:
        """Serve until SIGINT or SIGTERM (in the main thread) or ``stop()``; then let open
        requests finish and return."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()

    def start(self) -> None:
        """Serve in a background thread; return once it accepts connections."""
        self._thread = threading.Thread(
            target=self.serve_forever, name=self.thread_name, daemon=True
        )
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server's thread ended before it started serving")
            self._thread.join(0.01)

    def stop(self) -> None:
        """Stop serving (open requests finish first) and wait for it when it runs in the
        background."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._socket.close()


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: any free port) and listening: a busy port is an
    error at once, and connections wait in the backlog until uvicorn serves them."""
    family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    bound = socket.socket(family, socket.SOCK_STREAM)
    try:
        bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        bound.bind((host, port))
        bound.listen(BACKLOG)
    except OSError:
        bound.close()
        raise
    return bound


def server_config(app: Any, *, verbose: bool, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for a trainprobe server on a socket it is given: no lifespan, no
    proxy headers trusted, no Server header, trainprobe's logging (every request when
    ``verbose``), and ``options``."""
    return uvicorn.Config(
        app,
        lifespan="off",
        backlog=BACKLOG,
        proxy_headers=False,
        server_header=False,
        log_config=None,
        log_level="info" if verbose else "warning",
        access_log=verbose,
        **options,
    )


class _TimedProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on receiving each request's head, and
    SageMaker's error JSON for a request that is not HTTP."""

    request_seconds = ApiLimits.request_seconds

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._idle_cycle: object = None
        self._started_request = False

    def _start_head_timer(self) -> None:
        self._stop_head_timer()
        self._idle_cycle = self.cycle
        self._started_request = False
        self._head_timer = self.loop.call_later(self.request_seconds, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._started_request:
            message = (
                f"the request's line and headers did not arrive within {self.request_seconds:g} s"
            )
            self.transport.write(
                _raw_error("408 Request Timeout", "RequestTimeoutException", message)
            )
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is not None:
            self._started_request = True
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not self._idle_cycle:
            self._stop_head_timer()

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():
            self._start_head_timer()
        super().on_response_complete()

    def send_400_response(self, msg: str) -> None:
        message = (
            "the request is not valid HTTP/1.1 (its request line, a header, its Content-Length, "
            "or headers too large to buffer); expected POST / as boto3 sends"
        )
        self._stop_head_timer()
        self.transport.write(_raw_error("400 Bad Request", "ValidationException", message))
        self.transport.close()


class JobApiServer(ServerInThread):
    """``trainprobe serve``'s server: SageMaker's job operations on ``host``:``port`` (0: any
    free port, see ``port``), for callers signing with ``key`` (default: the key pair in
    ``$TRAINPROBE_HOME/serve-credentials``, created on first use)."""

    thread_name = "trainprobe-serve"

    def __init__(
        self,
        port: int = 0,
        *,
        host: str = LOCALHOST,
        store: JobStore | None = None,
        cwd: str | None = None,
        key: AccessKey | None = None,
        limits: ApiLimits | None = None,
        verbose: bool = False,
    ) -> None:
        self.host = str(ipaddress.ip_address(host))
        self.key = key if key is not None else load_or_create()
        limits = limits or ApiLimits()
        self._socket = listening_socket(self.host, port)
        self.port = int(self._socket.getsockname()[1])
        app = JobApi(
            key=self.key,
            store=store if store is not None else JobStore(),
            cwd=os.path.abspath(cwd or os.getcwd()),
            address=self.host,
            port=self.port,
            limits=limits,
        )
        protocol = type(
            "JobApiProtocol", (_TimedProtocol,), {"request_seconds": limits.request_seconds}
        )
        config = server_config(
            app,
            verbose=verbose,
            http=protocol,
            timeout_keep_alive=_KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_SECONDS,
            h11_max_incomplete_event_size=_LARGEST_HEAD,
        )
        self._server = uvicorn.Server(config)

    @property
    def url(self) -> str:
        """The endpoint URL to give a client."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"
