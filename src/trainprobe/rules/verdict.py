"""What a rule's evaluation produces: one ``Evaluation`` per step, and the final ``Verdict``.

The statuses are SageMaker's ``RuleEvaluationStatus`` values. ``Verdict.lines`` words a verdict
for people (``trainprobe rules run`` prints it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainprobe.config.statuses import RuleEvaluationStatus
from trainprobe.rules.actions.outcome import ActionOutcome
from trainprobe.rules.rule import Evidence
from trainprobe.storage.modes import ModeKeys, step_in_words

__all__ = [
    "ERROR",
    "IN_PROGRESS",
    "ISSUES_FOUND",
    "NO_ISSUES_FOUND",
    "SKIPPED",
    "STOPPED",
    "STOPPING",
    "Evaluation",
    "Verdict",
]

# The statuses by their short names (the rules' code reads better with them).
IN_PROGRESS = RuleEvaluationStatus.IN_PROGRESS
ISSUES_FOUND = RuleEvaluationStatus.ISSUES_FOUND
NO_ISSUES_FOUND = RuleEvaluationStatus.NO_ISSUES_FOUND
ERROR = RuleEvaluationStatus.ERROR
STOPPING = RuleEvaluationStatus.STOPPING
STOPPED = RuleEvaluationStatus.STOPPED
SKIPPED = "Skipped"
"""The result of a step the rule could not judge (not a rule status)."""

_MOST_EVIDENCE_SHOWN = 10


@dataclass(frozen=True)
class Evaluation:
    """One evaluated step: its result (IssuesFound, NoIssuesFound or Skipped), the evidence the
    rule recorded, the reason a skipped step was skipped, and how long it took."""

    step: int
    mode: ModeKeys | None
    mode_step: int | None
    result: str
    evidence: tuple[Evidence, ...] = ()
    reason: str | None = None
    seconds: float = 0.0
    time: float = 0.0

    @property
    def where(self) -> str:
        """The step as the training counts it: ``TRAIN step 10 (step 20)``."""
        return step_in_words(self.step, self.mode, self.mode_step)

    def to_json(self) -> dict[str, Any]:
        """The evaluation as one line of ``evaluations.jsonl``."""
        line: dict[str, Any] = {
            "step": self.step,
            "mode": self.mode.name if self.mode is not None else None,
            "mode_step": self.mode_step,
            "result": self.result,
            "evidence": [item.to_json() for item in self.evidence],
            "seconds": round(self.seconds, 6),
            "time": self.time,
        }
        if self.reason is not None:
            line["reason"] = self.reason
        return line


@dataclass
class Verdict:
    """How a rule's evaluation ended, with what it found along the way."""

    name: str
    status: RuleEvaluationStatus
    details: str
    steps_evaluated: int = 0
    steps_skipped: int = 0
    tensors_checked: int = 0
    unmatched: list[str] = field(default_factory=list)
    issues: list[Evaluation] = field(default_factory=list)
    actions: list[ActionOutcome] = field(default_factory=list)

    @property
    def first_issue(self) -> Evaluation | None:
        """The first step where the condition was met, if any."""
        return self.issues[0] if self.issues else None

    def lines(self) -> list[str]:
        """The verdict in words: status, details, evidence, counts and actions."""
        lines = [f"{self.name}: {self.status}", f"  {self.details}"]
        first = self.first_issue
        if first is not None and first.evidence:
            lines.append(f"  Evidence at {first.where}:")
            shown = first.evidence[:_MOST_EVIDENCE_SHOWN]
            lines += [f"    - {item.describe()}" for item in shown]
            if len(first.evidence) > len(shown):
                lines.append(f"    - ... and {len(first.evidence) - len(shown)} more")
        if len(self.issues) > 1:
            steps = ", ".join(issue.where for issue in self.issues[:20])
            more = " ..." if len(self.issues) > 20 else ""
            lines.append(f"  Issues at: {steps}{more}")
        lines.append(
            f"  Steps evaluated: {self.steps_evaluated}, skipped: {self.steps_skipped}; "
            f"tensors checked: {self.tensors_checked}"
        )
        if self.unmatched:
            lines.append(f"  Matched nothing: {'; '.join(self.unmatched)}")
        for outcome in self.actions:
            state = "done" if outcome.ok else "FAILED"
            action = f"{outcome.action} to {outcome.target}"
            lines.append(f"  Action {action}: {state}: {outcome.detail}")
        return lines
