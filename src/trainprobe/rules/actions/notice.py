"""What a rule's actions tell the world when it finds an issue: a ``Notice``.

Every action (email, SMS, webhook, stop request) words the same facts: which rule, which job,
at which step, and the evidence the rule recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainprobe.config.statuses import RuleEvaluationStatus
from trainprobe.rules.rule import Evidence
from trainprobe.storage.modes import step_in_words

__all__ = ["Notice"]

_MOST_EVIDENCE_SHOWN = 5


@dataclass(frozen=True)
class Notice:
    """A rule found an issue: ``rule`` (its configuration name) at ``step`` of the job whose
    tensors are at ``trial_path``, with the evidence it recorded."""

    rule: str
    trial_path: str
    step: int | None
    evidence: tuple[Evidence, ...] = field(default_factory=tuple)
    status: RuleEvaluationStatus = RuleEvaluationStatus.ISSUES_FOUND
    where: str | None = None
    """The step as the training counts it (``TRAIN step 10 (step 20)``); ``step N`` if None."""

    @property
    def subject(self) -> str:
        """A one-line summary: the email subject, the first line of every message."""
        where = self.where or (None if self.step is None else step_in_words(self.step))
        at = f" at {where}" if where is not None else ""
        return f"[trainprobe] rule {self.rule}: issues found{at}"

    def text(self) -> str:
        """The message: the summary, the job, then one line per piece of evidence."""
        lines = [self.subject, f"Job output: {self.trial_path}"]
        shown = self.evidence[:_MOST_EVIDENCE_SHOWN]
        lines += [f"- {item.describe()}" for item in shown]
        if len(self.evidence) > len(shown):
            lines.append(f"- ... and {len(self.evidence) - len(shown)} more")
        return "\n".join(lines)

    def short_text(self) -> str:
        """The message for a text message: the summary and the first piece of evidence."""
        if not self.evidence:
            return self.subject
        return f"{self.subject}: {self.evidence[0].describe()}"

    def to_json(self) -> dict[str, Any]:
        """The facts as JSON data (for webhooks)."""
        return {
            "rule": self.rule,
            "status": self.status,
            "step": self.step,
            "trial_path": self.trial_path,
            "evidence": [item.to_json() for item in self.evidence],
        }
