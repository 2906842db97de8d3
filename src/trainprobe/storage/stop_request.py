"""The stop request file: how a rule's StopTraining action asks the training to stop.

A rule whose StopTraining action fires writes ``stop_request.json`` into the tensor output
directory it watches (the hook's ``out_dir``), atomically. That is the one signal that works
whoever started the training: trainprobe's job runner, or the user running the script and the
rule separately. No other part writes that file, and no reader of the tensors reads it. The rules
write it (``rules.actions.stop_training``); the hook watches for it
(``capture.stop_request.StopRequestWatch``); the job runner reads it to say why a job stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trainprobe.storage import files, locations
from trainprobe.storage.modes import step_in_words

__all__ = [
    "STOP_REQUEST_FILE",
    "StopRequest",
    "load_stop_request",
    "read_stop_request",
    "stop_request_path",
    "write_stop_request",
]

STOP_REQUEST_FILE = "stop_request.json"


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
    where: str | None = None
    """The step as the training counts it (``TRAIN step 10 (step 20)``), where the rule knew."""

    @property
    def step_words(self) -> str | None:
        """The step in words: ``where``, else the global step; None without a step."""
        if self.where is not None:
            return self.where
        return None if self.step is None else step_in_words(self.step)

    def to_json(self) -> dict[str, Any]:
        """The request as it is written to the file."""
        found: dict[str, Any] = {
            "rule": self.rule,
            "message": self.message,
            "step": self.step,
            "time": self.time,
            "training_job_prefix": self.training_job_prefix,
        }
        if self.where is not None:
            found["where"] = self.where
        return found

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StopRequest:
        """Read the file's form back."""
        step = data.get("step")
        prefix = data.get("training_job_prefix")
        where = data.get("where")
        return cls(
            rule=str(data.get("rule", "a rule")),
            message=str(data.get("message", "")),
            step=int(step) if isinstance(step, int) else None,
            time=float(data.get("time", 0.0)),
            training_job_prefix=str(prefix) if prefix is not None else None,
            where=where if isinstance(where, str) else None,
        )

    def explain(self) -> str:
        """The request in words, for the training's error message."""
        words = self.step_words
        where = f" at {words}" if words is not None else ""
        text = f"rule {self.rule} found an issue{where} and asked to stop the training"
        return f"{text}: {self.message}" if self.message else text


def write_stop_request(out_dir: str, request: StopRequest) -> str:
    """Write ``request`` into the output at ``out_dir`` (atomically); returns the file's path."""
    path = stop_request_path(out_dir)
    files.write_atomic(path, json.dumps(request.to_json()).encode())
    return path


def load_stop_request(out_dir: str) -> StopRequest:
    """The stop request at ``out_dir``; OSError when there is none, ValueError (saying why)
    when the file is not a valid request."""
    content = files.read_bytes(stop_request_path(out_dir))
    try:
        data = json.loads(content)
        if not isinstance(data, dict):
            raise TypeError(f"a JSON object is expected, found {type(data).__name__}")
        return StopRequest.from_json(data)
    except (TypeError, ValueError, RecursionError, OverflowError) as error:
        raise ValueError(str(error) or type(error).__name__) from None


def read_stop_request(out_dir: str) -> StopRequest | None:
    """The stop request at ``out_dir``, or None when there is none (or it is not valid)."""
    try:
        return load_stop_request(out_dir)
    except (OSError, ValueError):
        return None
