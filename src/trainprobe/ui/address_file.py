"""Where a running ``trainprobe ui`` is: ``$TRAINPROBE_HOME/ui.json``, readable by the user alone.

The UI writes its origin, token and process id there while it serves, and removes the file when
it stops; ``trainprobe run`` reads it to print the page of the job it starts. Light on purpose:
reading it imports no web framework.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from trainprobe.jobs.store import trainprobe_home

__all__ = ["DEFAULT_PORT", "UI_FILE", "RunningUi", "forget_ui", "record_ui", "running_ui"]

DEFAULT_PORT = 8650
UI_FILE = "ui.json"


@dataclass(frozen=True)
class RunningUi:
    """A UI server that is running: its origin (``http://127.0.0.1:8650``) and token."""

    origin: str
    token: str

    def job_page(self, name: str) -> str:
        """The URL of job ``name``'s page, with the token that lets a browser in."""
        return f"{self.origin}/jobs/{quote(name, safe='')}?{urlencode({'token': self.token})}"


def _path() -> str:
    return os.path.join(trainprobe_home(), UI_FILE)


def record_ui(ui: RunningUi) -> str:
    """Write where ``ui`` runs (this process); the file written."""
    path = _path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump({"origin": ui.origin, "token": ui.token, "pid": os.getpid()}, file)
    os.replace(temporary, path)
    return path


def forget_ui(path: str) -> None:
    """Remove the file ``record_ui`` wrote, if it is still this process's."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError), open(path) as file:
        if int(json.load(file)["pid"]) == os.getpid():
            os.remove(path)


def running_ui() -> RunningUi | None:
    """The UI serving this trainprobe home, or None when none is running."""
    try:
        with open(_path()) as file:
            data = json.load(file)
        pid = int(data["pid"])
        found = RunningUi(str(data["origin"]), str(data["token"]))
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found
