"""``trainprobe ui`` as a user starts it: a subprocess on 127.0.0.1 (a free port), its own
trainprobe home; and plain HTTP requests to it, with whatever Host, cookie and headers a test
chooses (``http.client`` sends the Host it is given)."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class UiProcess:
    """A running ``trainprobe ui``: the URL it printed, split into its parts."""

    url: str
    port: int
    token: str
    home: Path

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def cookie(self) -> str:
        return f"trainprobe-ui-{self.port}={self.token}"

    def request(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        cookie: bool = True,
    ) -> tuple[int, dict[str, str], bytes]:
        """One request; the status, headers (lower-case names) and body."""
        sent = {"Host": f"127.0.0.1:{self.port}"}
        if cookie:
            sent["Cookie"] = self.cookie
        sent.update(headers or {})
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in sent.items():
                connection.putheader(name, value)
            if body is not None:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            return (
                response.status,
                {name.lower(): value for name, value in response.getheaders()},
                response.read(),
            )
        finally:
            connection.close()

    def get_json(self, path: str) -> Any:
        status, _, body = self.request("GET", path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def csrf(self) -> str:
        return str(self.get_json("/api/session")["csrf"])


def environment(home: Path) -> dict[str, str]:
    return {**os.environ, "TRAINPROBE_HOME": str(home), "TRAINPROBE_STOP_GRACE_SECONDS": "5"}


@contextmanager
def trainprobe_ui(home: Path) -> Iterator[UiProcess]:
    """``trainprobe ui --port 0 --no-browser`` until the block ends (then Ctrl-C)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "trainprobe.cli.main", "ui", "--port", "0", "--no-browser"],
        env=environment(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.fullmatch(r"trainprobe ui: (http://127\.0\.0\.1:(\d+)/\?token=(\S+))\n", line)
        assert found, f"trainprobe ui printed {line!r}"
        yield UiProcess(found[1], int(found[2]), found[3], home)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until(condition: Any, what: str, timeout: float = 120.0) -> Any:
    """``condition()``'s first true value; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


def url_path(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")
