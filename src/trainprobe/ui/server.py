"""The server behind ``trainprobe ui``: uvicorn serving the UI's app on one address.

It binds first (a busy port is an error at once; port 0 gets a free one), then serves. While it
serves, ``ui.address_file`` says where, so that ``trainprobe run`` can print a job's page.
"""

from __future__ import annotations

import ipaddress

import uvicorn

from trainprobe.jobs.server.api_server import (
    LOCALHOST,
    ServerInThread,
    listening_socket,
    server_config,
)
from trainprobe.jobs.store import JobStore
from trainprobe.ui.access import Access
from trainprobe.ui.address_file import DEFAULT_PORT, RunningUi, forget_ui, record_ui
from trainprobe.ui.app import ui_app

__all__ = ["DEFAULT_PORT", "UiServer"]

_GRACEFUL_SHUTDOWN_SECONDS = 2


class UiServer(ServerInThread):
    """``trainprobe ui``'s server on ``host``:``port`` over ``store``."""

    thread_name = "trainprobe-ui"

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        *,
        host: str = LOCALHOST,
        store: JobStore | None = None,
        token: str | None = None,
        verbose: bool = False,
    ) -> None:
        self.host = str(ipaddress.ip_address(host))
        self._socket = listening_socket(self.host, port)
        self.port = int(self._socket.getsockname()[1])
        self.access = Access(self.host, self.port, token)
        self.store = store if store is not None else JobStore()
        config = server_config(
            ui_app(self.store, self.access, closing=lambda: self._server.should_exit),
            verbose=verbose,
            timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_SECONDS,
        )
        self._server = uvicorn.Server(config)

    @property
    def url(self) -> str:
        """The URL to open: the jobs page, with the token."""
        return self.access.url("/")

    def serve_forever(self) -> None:
        """Serve until SIGINT or SIGTERM (in the main thread) or ``stop()``, saying where in
        ``ui.address_file`` meanwhile."""
        try:
            recorded = record_ui(RunningUi(self.access.origin, self.access.token))
        except OSError:
            recorded = None  # trainprobe run will not print the job's page; the UI works
        try:
            super().serve_forever()
        finally:
            if recorded is not None:
                forget_ui(recorded)
