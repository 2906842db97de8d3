"""The server behind ``trainprobe ui``: uvicorn serving the UI's app on one address.

It binds first (a busy port is an error at once; port 0 gets a free one), then serves. While it
runs, ``$TRAINPROBE_HOME/ui.json`` (readable by the user alone) says where, with the token, so
that ``trainprobe run`` can print a job's page; ``running_ui`` reads it back, only while the
server that wrote it is alive.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import threading

import uvicorn

from trainprobe.jobs.api_server import BACKLOG, LOCALHOST
from trainprobe.jobs.store import JobStore, trainprobe_home
from trainprobe.ui.access import Access
from trainprobe.ui.app import ui_app

__all__ = ["DEFAULT_PORT", "UI_FILE", "UiServer", "running_ui"]

DEFAULT_PORT = 8650
UI_FILE = "ui.json"
_GRACEFUL_SHUTDOWN_SECONDS = 2


class UiServer:
    """``trainprobe ui``'s server on ``host``:``port`` over ``store``."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        *,
        host: str = LOCALHOST,
        store: JobStore | None = None,
        token: str | None = None,
        verbose: bool = False,
    ) -> None:
        address = ipaddress.ip_address(host)
        self.host = str(address)
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._socket.bind((self.host, port))
            self._socket.listen(BACKLOG)
        except OSError:
            self._socket.close()
            raise
        self.port = int(self._socket.getsockname()[1])
        self.access = Access(self.host, self.port, token)
        self.store = store if store is not None else JobStore()
        config = uvicorn.Config(
            ui_app(self.store, self.access, closing=lambda: self._server.should_exit),
            lifespan="off",
            backlog=BACKLOG,
            timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_SECONDS,
            proxy_headers=False,
            server_header=False,
            log_config=None,
            log_level="info" if verbose else "warning",
            access_log=verbose,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The URL to open: the jobs page, with the token."""
        return self.access.url("/")

    def serve_forever(self) -> None:
        """Serve until SIGINT or SIGTERM (in the main thread) or ``stop()``."""
        path = os.path.join(trainprobe_home(), UI_FILE)
        try:
            _write_private(
                path, {"origin": self.access.origin, "token": self.access.token, "pid": os.getpid()}
            )
        except OSError:
            path = ""  # trainprobe run will not print the page's address; the UI still works
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()
            if path:
                with contextlib.suppress(OSError):
                    os.remove(path)

    def start(self) -> None:
        """Serve in a background thread; return once it accepts connections."""
        self._thread = threading.Thread(
            target=self.serve_forever, name="trainprobe-ui", daemon=True
        )
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the UI server's thread ended before it started serving")
            self._thread.join(0.01)

    def stop(self) -> None:
        """Stop serving and wait for it when it runs in the background."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._socket.close()


def _write_private(path: str, data: dict[str, object]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(data, file)
    os.replace(temporary, path)


def running_ui(home: str | None = None) -> Access | None:
    """The UI running for this trainprobe home (its origin and token), or None."""
    path = os.path.join(home or trainprobe_home(), UI_FILE)
    try:
        with open(path) as file:
            data = json.load(file)
        pid, origin, token = int(data["pid"]), str(data["origin"]), str(data["token"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    host, _, port = origin.removeprefix("http://").rpartition(":")
    return Access(host.strip("[]"), int(port), token)
