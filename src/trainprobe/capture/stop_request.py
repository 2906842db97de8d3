"""The StopTraining signal, as the training side sees it: a stop request file to check for.

The file and its format are ``storage.stop_request``'s. The hook checks at each step start,
cheaply: ``StopRequestWatch.check`` does nothing but read the clock until ``interval`` seconds
have passed since its last look, then one ``stat``; it reads the file only when its modification
time changed. Requests older than the watch (left by an earlier run in the same directory) are
ignored. The hook calls, at step start and outside its own error guard::

    self._stop_watch = StopRequestWatch(out_dir)           # once, in __init__
    self._stop_watch.raise_if_requested(self.step)         # at each step start

which raises ``TrainingStopRequested`` (a RuntimeError, so the training stops with a
traceback naming the rule and its reason) once a request is there. Nothing else ever leaves
``check``: a request that is not valid (not JSON, too deeply nested, a ``time`` that is not a
number) is ignored with one warning, and a watch that cannot look at all (a path with a NUL)
turns itself off with one warning; the training goes on.
"""

from __future__ import annotations

import logging
import os
import time

from trainprobe.errors import CaptureError
from trainprobe.storage.stop_request import StopRequest, load_stop_request, stop_request_path

__all__ = ["StopRequestWatch", "TrainingStopRequested"]

log = logging.getLogger(__name__)


class TrainingStopRequested(CaptureError):
    """Raised in the training when a rule's StopTraining action asked to stop it."""

    def __init__(self, request: StopRequest, step: int | None = None) -> None:
        self.request = request
        self.step = step
        at = f" at step {step}" if step is not None else ""
        super().__init__(f"trainprobe stopped the training{at}: {request.explain()}")


class StopRequestWatch:
    """Looks for a stop request at most once per ``interval`` seconds; cheap to call often.

    ``since`` (seconds since the epoch, default: now) is the age limit: older requests are
    left from an earlier run and ignored.
    """

    def __init__(self, out_dir: str, *, interval: float = 0.2, since: float | None = None):
        self.out_dir = out_dir
        self.path = stop_request_path(out_dir)
        self.interval = interval
        self.since = time.time() if since is None else since
        self._next_look = 0.0
        self._seen_mtime: int | None = None
        self._found: StopRequest | None = None
        self._off = False

    def check(self) -> StopRequest | None:
        """The stop request, once there is a new one; None otherwise. Never raises."""
        if self._found is not None or self._off:
            return self._found
        try:
            return self._look()
        except Exception as error:  # the training must never die of its stop watch
            self._off = True
            log.warning(
                "trainprobe: cannot watch %r for stop requests (%s: %s); a rule's "
                "StopTraining action will not stop this training",
                self.path,
                type(error).__name__,
                error,
            )
            return None

    def _look(self) -> StopRequest | None:
        now = time.monotonic()
        if now < self._next_look:
            return None
        self._next_look = now + self.interval
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except OSError:
            return None
        if mtime == self._seen_mtime:
            return None
        self._seen_mtime = mtime
        try:
            request = load_stop_request(self.out_dir)
        except OSError:
            return None
        except ValueError as error:
            log.warning("trainprobe: ignoring the stop request %s, not valid: %s", self.path, error)
            return None
        if request.time >= self.since:
            self._found = request
        return self._found

    def raise_if_requested(self, step: int | None = None) -> None:
        """Raise TrainingStopRequested when a rule asked to stop the training."""
        request = self.check()
        if request is not None:
            raise TrainingStopRequested(request, step)
