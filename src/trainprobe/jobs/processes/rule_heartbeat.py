"""A rule process's heartbeat: a file whose modification time says it is still making progress.

The job runner creates the file before it starts the process; the process touches it each time
its rules go round (``RuleFollowing.on_progress``), at most once every ``BEAT_SECONDS``. A rule
stuck in its own code (an endless loop, a wait that never ends) stops touching it, and the runner,
which reads its age (``seconds_since_beat``), ends the process. Touching a file needs no free
space, so a full disk does not stop the heartbeat.
"""

from __future__ import annotations

import contextlib
import os
import time

__all__ = ["BEAT_SECONDS", "Heartbeat", "create_heartbeat", "seconds_since_beat"]

BEAT_SECONDS = 1.0


def create_heartbeat(path: str) -> None:
    """Create (or refresh) the heartbeat file at ``path``, as if the process had just beaten."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8"):
        pass
    os.utime(path)


def seconds_since_beat(path: str, now: float | None = None) -> float | None:
    """How long ago the heartbeat at ``path`` last beat; None when there is no such file."""
    try:
        modified = os.stat(path).st_mtime
    except OSError:
        return None
    return max(0.0, (time.time() if now is None else now) - modified)


class Heartbeat:
    """The process's side: ``beat()`` as often as it likes; the file is touched at most once
    every ``every`` seconds. A failure to touch it is ignored (the runner then sees no beat)."""

    def __init__(self, path: str, every: float = BEAT_SECONDS) -> None:
        self.path = path
        self.every = every
        self._last = float("-inf")

    def beat(self) -> None:
        """Say the process is making progress."""
        now = time.monotonic()
        if now - self._last < self.every:
            return
        self._last = now
        with contextlib.suppress(OSError):
            os.utime(self.path)
