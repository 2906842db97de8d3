"""A rule's output: its evaluations and actions as JSON lines, and its status, per rule.

::

    <job>/rule-output/<RuleConfigurationName>/evaluations.jsonl   one line per evaluated step
    <job>/rule-output/<RuleConfigurationName>/actions.jsonl       one line per action taken
    <job>/rule-output/<RuleConfigurationName>/status.json         the latest status

``status.json`` holds SageMaker's ``DebugRuleEvaluationStatuses`` fields (RuleConfigurationName,
RuleEvaluationStatus, StatusDetails, LastModifiedTime in seconds since the epoch) plus
trainprobe's own (Finished, StepsEvaluated, StepsSkipped, TensorsChecked, and Unmatched: the
lookups of a debugging rule that found nothing). It is replaced atomically, so a reader sees the old
status or the new one, never half of one. Lines are appended whole, one ``write`` each, and the
readers here ignore a last line without its newline: a reader following the file while it grows
never sees half a line.

A rule's run that its process left unfinished (killed, out of memory) is taken up by another
process: ``RuleOutputWriter.take_up`` drops a line left half-written and says what the earlier
run wrote (``EarlierRun``), so that the new one writes only what follows.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainprobe.config.statuses import RuleEvaluationStatus
from trainprobe.storage import files
from trainprobe.storage.job_layout import ACTIONS_FILE, EVALUATIONS_FILE, STATUS_FILE

__all__ = [
    "EarlierRun",
    "RuleOutputWriter",
    "RuleStatus",
    "read_actions",
    "read_evaluations",
    "read_status",
]


@dataclass(frozen=True)
class RuleStatus:
    """One rule's status as ``status.json`` holds it."""

    rule_configuration_name: str
    rule_evaluation_status: RuleEvaluationStatus
    status_details: str
    last_modified_time: float
    finished: bool = False
    steps_evaluated: int = 0
    steps_skipped: int = 0
    tensors_checked: int = 0
    unmatched: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The status as SageMaker names its fields, plus trainprobe's."""
        return {
            "RuleConfigurationName": self.rule_configuration_name,
            "RuleEvaluationStatus": self.rule_evaluation_status,
            "StatusDetails": self.status_details,
            "LastModifiedTime": self.last_modified_time,
            "Finished": self.finished,
            "StepsEvaluated": self.steps_evaluated,
            "StepsSkipped": self.steps_skipped,
            "TensorsChecked": self.tensors_checked,
            "Unmatched": list(self.unmatched),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RuleStatus:
        """Read ``to_json``'s form back."""
        return cls(
            rule_configuration_name=str(data["RuleConfigurationName"]),
            rule_evaluation_status=RuleEvaluationStatus(data["RuleEvaluationStatus"]),
            status_details=str(data.get("StatusDetails", "")),
            last_modified_time=float(data["LastModifiedTime"]),
            finished=bool(data.get("Finished", False)),
            steps_evaluated=int(data.get("StepsEvaluated", 0)),
            steps_skipped=int(data.get("StepsSkipped", 0)),
            tensors_checked=int(data.get("TensorsChecked", 0)),
            unmatched=tuple(str(item) for item in data.get("Unmatched") or ()),
        )


@dataclass(frozen=True)
class EarlierRun:
    """What an earlier process wrote of a rule's run that it did not finish."""

    last_evaluated: int | None
    """The step (for a profiler rule, the window) of its last evaluation; None if none."""
    acted: bool
    """Whether it ran the rule's actions (they run once, at the rule's first issue)."""


_TAIL_BYTES = 64 * 1024


class RuleOutputWriter:
    """Writes one rule's output directory. Thread-safe: lines are appended under a lock."""

    def __init__(self, directory: str) -> None:
        self.directory = directory.rstrip("/")
        if not files.is_url(self.directory):
            os.makedirs(self.directory, exist_ok=True)
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}
        self._objects: dict[str, bytearray] = {}

    def _append(self, name: str, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if files.is_url(self.directory):
                # An object cannot be appended to: it is replaced, whole, with the new line.
                content = self._objects.setdefault(name, bytearray())
                content += line
                files.write_atomic(f"{self.directory}/{name}", content)
                return
            descriptor = self._open.get(name)
            if descriptor is None:
                path = f"{self.directory}/{name}"
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                self._open[name] = descriptor
            written = os.write(descriptor, line)
            while written < len(line):
                written += os.write(descriptor, line[written:])

    def append_evaluation(self, record: Mapping[str, Any]) -> None:
        """Append one evaluation (JSON data: no NaN, no infinity) to ``evaluations.jsonl``."""
        self._append(EVALUATIONS_FILE, record)

    def append_action(self, record: Mapping[str, Any]) -> None:
        """Append one action's outcome to ``actions.jsonl``."""
        self._append(ACTIONS_FILE, record)

    def write_status(self, status: RuleStatus) -> None:
        """Replace ``status.json`` atomically."""
        data = json.dumps(status.to_json(), indent=2) + "\n"
        files.write_atomic(f"{self.directory}/{STATUS_FILE}", data.encode())

    def take_up(self) -> EarlierRun:
        """Write after what an earlier writer of this directory left (its process ended before
        the rule did): a last line it left half-written is dropped. What it wrote."""
        complete: dict[str, bytes] = {}
        with self._lock:
            for name in (EVALUATIONS_FILE, ACTIONS_FILE):
                path = f"{self.directory}/{name}"
                if files.is_url(self.directory):
                    try:
                        data = files.read_bytes(path)
                    except FileNotFoundError:
                        data = b""
                    data = data[: data.rfind(b"\n") + 1]
                    self._objects[name] = bytearray(data)
                else:
                    data = _complete_tail(path)
                complete[name] = data
        lines = complete[EVALUATIONS_FILE].splitlines()
        last = json.loads(lines[-1]) if lines else None
        return EarlierRun(
            last_evaluated=int(last["step"]) if last is not None else None,
            acted=bool(complete[ACTIONS_FILE].strip()),
        )

    def close(self) -> None:
        """Close the line files (they reopen if written again)."""
        with self._lock:
            while self._open:
                os.close(self._open.popitem()[1])

    def __del__(self) -> None:
        for descriptor in getattr(self, "_open", {}).values():
            os.close(descriptor)


def _complete_tail(path: str) -> bytes:
    """The last complete lines of the local file ``path`` (``_TAIL_BYTES`` of them, at least
    the last one whole), having cut off a last line without its newline."""
    try:
        with open(path, "r+b") as file:
            end = file.seek(0, os.SEEK_END)
            length = _TAIL_BYTES
            while True:
                start = max(0, end - length)
                file.seek(start)
                tail = file.read()
                kept = tail.rfind(b"\n") + 1
                first = tail.rfind(b"\n", 0, max(0, kept - 1)) + 1  # where the last line begins
                if not start or first:
                    break
                length *= 4
            if start + kept < end:
                file.truncate(start + kept)
    except FileNotFoundError:
        return b""
    if start:  # the first line may be cut: keep whole lines only
        return tail[tail.find(b"\n") + 1 : kept]
    return tail[:kept]


def _read_lines(path: str) -> list[dict[str, Any]]:
    try:
        data = files.read_bytes(path)
    except FileNotFoundError:
        return []
    complete = data[: data.rfind(b"\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


def read_evaluations(directory: str) -> list[dict[str, Any]]:
    """Every complete evaluation line written so far, in order (empty when there is none)."""
    return _read_lines(f"{directory.rstrip('/')}/{EVALUATIONS_FILE}")


def read_actions(directory: str) -> list[dict[str, Any]]:
    """Every complete action line written so far, in order (empty when there is none)."""
    return _read_lines(f"{directory.rstrip('/')}/{ACTIONS_FILE}")


def read_status(directory: str) -> RuleStatus | None:
    """The rule's latest status, or None before it wrote one."""
    try:
        data = files.read_bytes(f"{directory.rstrip('/')}/{STATUS_FILE}")
    except FileNotFoundError:
        return None
    return RuleStatus.from_json(json.loads(data))
