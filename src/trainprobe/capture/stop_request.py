"""The StopTraining signal, as the training side sees it: a stop request file to check for.

A rule whose StopTraining action fires writes ``stop_request.json`` into the tensor output
directory it watches (the hook's ``out_dir``), atomically. That is the one signal that works
whoever started the training: trainprobe's job runner, or the user running the script and the
rule separately. No other part writes that file, and no reader of the tensors reads it.

The hook checks at each step start, cheaply: ``StopRequestWatch.check`` does nothing but read
the clock until ``interval`` seconds have passed since its last look, then one ``stat``; it
reads the file only when its modification time changed. Requests older than the watch (left
by an earlier run in the same directory) are ignored. The hook calls, at step start and
outside its own error guard::

    self._stop_watch = StopRequestWatch(out_dir)           # once, in __init__
    self._stop_watch.raise_if_requested(self.step)         # at each step start

which raises ``TrainingStopRequested`` (a RuntimeError, so the training stops with a
traceback naming the rule and its reason) once a request is there. Nothing else ever leaves
``check``: a request that is not valid (not JSON, too deeply nested, a ``time`` that is not a
number) is ignored with one warning, and a watch that cannot look at all (a path with a NUL)
turns itself off with one warning; the training goes on.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from trainprobe.storage import files, locations

__all__ = [
    "STOP_REQUEST_FILE",
    "StopRequest",
    "StopRequestWatch",
    "TrainingStopRequested",
    "read_stop_request",
    "stop_request_path",
    "write_stop_request",
]

STOP_REQUEST_FILE = "stop_request.json"

log = logging.getLogger(__name__)


def stop_request_path(out_dir: str) -> str:
    """The stop request file of the tensor output at ``out_dir``."""
    return locations.join(out_dir, STOP_REQUEST_FILE)


@dataclass(frozen=True)
class StopRequest:
    """A rule's request to stop the training: who asked, why, at which step, and when."""

    rule: str
    message: str
    step: int | None
    time: float
    training_job_prefix: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The request as it is written to the file."""
        return {
            "rule": self.rule,
            "message": self.message,
            "step": self.step,
            "time": self.time,
            "training_job_prefix": self.training_job_prefix,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StopRequest:
        """Read the file's form back."""
        step = data.get("step")
        prefix = data.get("training_job_prefix")
        return cls(
            rule=str(data.get("rule", "a rule")),
            message=str(data.get("message", "")),
            step=int(step) if isinstance(step, int) else None,
            time=float(data.get("time", 0.0)),
            training_job_prefix=str(prefix) if prefix is not None else None,
        )

    def explain(self) -> str:
        """The request in words, for the training's error message."""
        where = f" at step {self.step}" if self.step is not None else ""
        text = f"rule {self.rule} found an issue{where} and asked to stop the training"
        return f"{text}: {self.message}" if self.message else text


def write_stop_request(out_dir: str, request: StopRequest) -> str:
    """Write ``request`` into the output at ``out_dir`` (atomically); returns the file's path."""
    path = stop_request_path(out_dir)
    files.write_atomic(path, json.dumps(request.to_json()).encode())
    return path


def read_stop_request(out_dir: str) -> StopRequest | None:
    """The stop request at ``out_dir``, or None when there is none (or it is not valid)."""
    try:
        data = json.loads(files.read_bytes(stop_request_path(out_dir)))
        return StopRequest.from_json(data) if isinstance(data, dict) else None
    except (OSError, TypeError, ValueError, RecursionError, OverflowError):
        return None


class TrainingStopRequested(RuntimeError):
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
            content = files.read_bytes(self.path)
        except OSError:
            return None
        try:
            data = json.loads(content)
            if not isinstance(data, dict):
                raise TypeError(f"a JSON object is expected, found {type(data).__name__}")
            request = StopRequest.from_json(data)
        except (TypeError, ValueError, RecursionError, OverflowError) as error:
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
