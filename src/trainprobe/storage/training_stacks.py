"""Where a stuck training is: the Python stacks of every thread of each training process.

When the training stops advancing, each training process writes the stacks of all its threads
(``trainprobe.capture.stack_watch``), under its profiler output::

    framework/pytorch/flight_recorder/stacks/<node>.stacks.json

one file per process, replaced by a newer one, written atomically. A process writes it when a
rule asks (``stacks_request.json`` in the profiler output: StalledTrainingRule does, before it
acts) or by itself when one step has run longer than its limit. ``where_stuck`` says in words
where the main thread of each process is: the innermost frame it waits in and, when that is in a
library, the innermost frame of the user's own code that called it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from trainprobe.storage import files
from trainprobe.storage.flight_captures import CAPTURES_DIR
from trainprobe.storage.locations import join

__all__ = [
    "STACKS_REQUEST_FILE",
    "Frame",
    "ProcessStacks",
    "ThreadStack",
    "read_stacks",
    "request_stacks",
    "stacks_requested_at",
    "where_stuck",
    "write_stacks",
]

STACKS_DIR = f"{CAPTURES_DIR}/stacks"
STACKS_SUFFIX = ".stacks.json"
STACKS_REQUEST_FILE = "stacks_request.json"
_LIBRARY_PARTS = ("site-packages", "dist-packages", f"{os.sep}lib{os.sep}python", "<frozen")
_TRAINPROBE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclass(frozen=True)
class Frame:
    """One frame of a stack: file, line and function."""

    file: str
    line: int
    function: str

    @property
    def in_library(self) -> bool:
        """Whether the frame is in Python's, an installed package's or trainprobe's code, not
        the user's."""
        return self.file.startswith(_TRAINPROBE_DIR) or any(
            part in self.file for part in _LIBRARY_PARTS
        )

    def where(self) -> str:
        """``train.py:84``: the file's name and the line."""
        return f"{os.path.basename(self.file)}:{self.line}"


@dataclass(frozen=True)
class ThreadStack:
    """One thread's stack, outermost frame first."""

    name: str
    main: bool
    frames: list[Frame]

    def where(self) -> str:
        """Where the thread is, in words."""
        if not self.frames:
            return f"{self.name} has no Python frame"
        innermost = self.frames[-1]
        user = next((frame for frame in reversed(self.frames) if not frame.in_library), None)
        text = f"{self.name} waits in {innermost.function} ({innermost.where()})"
        if user is not None and user is not innermost:
            text += f" called from {user.function} at {user.where()}"
        return text


@dataclass(frozen=True)
class ProcessStacks:
    """The stacks of one training process, when it wrote them and why."""

    node: str
    pid: int
    time: float
    step: int | None
    seconds_in_step: float | None
    reason: str
    threads: list[ThreadStack] = field(default_factory=list)

    def where(self) -> str:
        """Where the process is stuck, in words: its main thread first."""
        ordered = sorted(self.threads, key=lambda thread: not thread.main)
        at = f" in step {self.step}" if self.step is not None else ""
        text = f"{self.node}{at}: " + (ordered[0].where() if ordered else "no thread")
        if self.seconds_in_step is not None:
            text += f" ({self.seconds_in_step:.0f} s into the step)"
        return text

    def to_json(self) -> dict[str, Any]:
        """The file's form."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessStacks:
        """Read the file's form back; ValueError when it is not one."""
        try:
            threads = [
                ThreadStack(
                    str(thread["name"]),
                    bool(thread["main"]),
                    [
                        Frame(str(frame["file"]), int(frame["line"]), str(frame["function"]))
                        for frame in thread["frames"]
                    ],
                )
                for thread in data["threads"]
            ]
            step = data.get("step")
            seconds = data.get("seconds_in_step")
            return cls(
                str(data["node"]),
                int(data["pid"]),
                float(data["time"]),
                None if step is None else int(step),
                None if seconds is None else float(seconds),
                str(data.get("reason", "")),
                threads,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a stacks file: {error}") from None


def write_stacks(profiler_output: str, stacks: ProcessStacks) -> str:
    """Write one process's stacks (atomically); returns the file's path."""
    path = join(profiler_output, f"{STACKS_DIR}/{stacks.node}{STACKS_SUFFIX}")
    files.write_atomic(path, json.dumps(stacks.to_json()).encode())
    return path


def read_stacks(profiler_output: str, since: float = 0.0) -> list[ProcessStacks]:
    """The stacks each process wrote at ``since`` (seconds since the epoch) or later, by node."""
    root = join(profiler_output, STACKS_DIR)
    found = []
    for relative in files.list_files(root, STACKS_SUFFIX):
        try:
            stacks = ProcessStacks.from_json(json.loads(files.read_bytes(join(root, relative))))
        except (OSError, ValueError):
            continue
        if stacks.time >= since:
            found.append(stacks)
    return sorted(found, key=lambda stacks: stacks.node)


def where_stuck(stacks: list[ProcessStacks]) -> str:
    """Where every process is, in one sentence; '' for no stacks."""
    return "; ".join(process.where() for process in stacks)


def request_stacks(profiler_output: str) -> float:
    """Ask every training process profiling into ``profiler_output`` for its stacks; returns
    the request's time (the stacks that answer it are at least as new)."""
    asked = time.time()
    files.write_atomic(
        join(profiler_output, STACKS_REQUEST_FILE), json.dumps({"time": asked}).encode()
    )
    return asked


def stacks_requested_at(profiler_output: str) -> float | None:
    """When the stacks were last asked for; None when they never were (or it cannot be read)."""
    try:
        data = json.loads(files.read_bytes(join(profiler_output, STACKS_REQUEST_FILE)))
        return float(data["time"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
