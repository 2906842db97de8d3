"""Following a job from outside: its latest saved step, its log lines, its rules' verdicts.

What a progress display needs and the job's files hold: ``latest_saved_step`` lists only the
newest index directory of the tensor output; ``LogTail`` hands out the lines a log file gained
since it last looked (whole lines only); ``rule_verdict`` reads a rule's status and, when it
found an issue, the evidence of its first issue.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from trainprobe.rules.rule import Evidence
from trainprobe.rules.verdict import ISSUES_FOUND
from trainprobe.storage import locations
from trainprobe.storage.rule_output import read_evaluations, read_status

__all__ = ["LogTail", "RuleVerdict", "latest_saved_step", "rule_verdict"]


def latest_saved_step(debug_output: str) -> int | None:
    """The highest step with a saved index file under ``debug_output``, or None."""
    index = os.path.join(debug_output, "index")
    try:
        directories = sorted(os.listdir(index))
    except OSError:
        return None
    for directory in reversed(directories):
        try:
            names = os.listdir(os.path.join(index, directory))
        except OSError:
            continue
        steps = [
            parsed[0]
            for name in names
            if (parsed := locations.parse_index_file_name(os.path.join(index, directory, name)))
        ]
        if steps:
            return max(steps)
    return None


class LogTail:
    """The lines a growing file gains, read a whole line at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def new_lines(self) -> list[str]:
        """The complete lines written since the last call (none if the file does not exist)."""
        try:
            with open(self.path, "rb") as file:
                file.seek(self._offset)
                data = file.read()
        except OSError:
            return []
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        return [line.decode("utf-8", "replace") for line in complete]


@dataclass
class RuleVerdict:
    """A rule's status as its output says, with the evidence of its first issue."""

    name: str
    status: str
    details: str
    steps_evaluated: int = 0
    issue_step: int | None = None
    evidence: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The verdict in words."""
        lines = [f"{self.name}: {self.status}"]
        if self.details:
            lines.append(f"  {self.details}")
        if self.evidence:
            lines.append(f"  Evidence at step {self.issue_step}:")
            lines += [f"    - {item}" for item in self.evidence]
        if self.steps_evaluated:
            lines.append(f"  Steps evaluated: {self.steps_evaluated}")
        return lines


_MOST_EVIDENCE = 10


def _describe(item: object) -> str:
    if not isinstance(item, dict) or "message" not in item:
        return str(item)
    step = item.get("step")
    tensor = item.get("tensor")
    return Evidence(
        message=str(item["message"]),
        tensor=str(tensor) if tensor is not None else None,
        step=step if isinstance(step, int) else None,
        value=item.get("value"),
        threshold=item.get("threshold"),
    ).describe()


def rule_verdict(rule_output_dir: str, name: str, status: str, details: str) -> RuleVerdict:
    """The verdict of the rule writing ``rule_output_dir`` whose reported status is ``status``
    (DescribeTrainingJob's, which knows about lost runners) with ``details``."""
    verdict = RuleVerdict(name, status, details)
    written = read_status(rule_output_dir)
    if written is not None:
        verdict.steps_evaluated = written.steps_evaluated
    if status != ISSUES_FOUND:
        return verdict
    for evaluation in read_evaluations(rule_output_dir):
        if evaluation.get("result") == ISSUES_FOUND:
            verdict.issue_step = evaluation.get("step")
            evidence = [_describe(item) for item in evaluation.get("evidence", [])]
            verdict.evidence = evidence[:_MOST_EVIDENCE]
            if len(evidence) > _MOST_EVIDENCE:
                verdict.evidence.append(f"... and {len(evidence) - _MOST_EVIDENCE} more")
            break
    return verdict
