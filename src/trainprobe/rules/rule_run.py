"""What every rule's run keeps, debugging or profiler rule alike: its verdict, its status as
SageMaker reports it (written to ``status.json`` as it changes), and its actions on a first issue.

A rule may say what it did not judge and why (a built-in rule's ``remarks()``: tensors it set
aside); its final status ends with those sentences, whatever the status.
"""

from __future__ import annotations

import logging
import threading
import time

from trainprobe.rules.actions import Notice, RuleActions
from trainprobe.rules.verdict import IN_PROGRESS, STOPPING, Evaluation, Verdict
from trainprobe.storage.rule_output import RuleOutputWriter, RuleStatus

__all__ = ["RuleRun"]

log = logging.getLogger(__name__)


class RuleRun:
    """The status, verdict, output and actions of one rule's run (see the evaluators).

    ``output_dir`` is the rule's own directory (``<job>/rule-output/<name>``); None writes
    nothing. ``kind`` names the rule in log lines.
    """

    kind = "rule"

    def __init__(self, name: str, output_dir: str | None) -> None:
        self.verdict = Verdict(name, IN_PROGRESS, "")
        self.finished = False
        self._writer = RuleOutputWriter(output_dir) if output_dir is not None else None
        self._lock = threading.Lock()
        self._actions = RuleActions([])

    @property
    def name(self) -> str:
        """The rule configuration name."""
        return self.verdict.name

    def stop(self) -> None:
        """Say the rule is stopping (the runner finishes it as Stopped)."""
        self._set_status(STOPPING, "stop requested")

    def finish(self, status: str, details: str) -> None:
        """End the rule's run with ``status``, followed by the rule's remarks; later calls
        change nothing."""
        # A debugging rule's evaluator holds its rule as ``rule``; a profiler run has none.
        said = _remarks(getattr(self, "rule", None))
        if said and not self.finished:
            details = details.rstrip()
            details = " ".join([details if details.endswith(".") else f"{details}.", *said])
        self._set_status(status, details, finished=True)
        if self._writer is not None:
            self._writer.close()

    def _run_actions(self, notice: Notice, evaluation: Evaluation, where: str) -> None:
        """Run the actions for a first issue; each outcome is kept, and written with
        ``where`` (``step`` or ``window``) naming the evaluation."""
        if not len(self._actions):
            return
        for outcome in self._actions.run(notice):
            self.verdict.actions.append(outcome)
            if self._writer is not None:
                self._writer.append_action({where: evaluation.step, **outcome.to_json()})

    def _set_status(self, status: str, details: str, *, finished: bool = False) -> None:
        with self._lock:
            if self.finished:
                return
            self.finished = finished
            self.verdict.status = status
            self.verdict.details = details
            if self._writer is not None:
                self._writer.write_status(
                    RuleStatus(
                        rule_configuration_name=self.name,
                        rule_evaluation_status=status,
                        status_details=details,
                        last_modified_time=time.time(),
                        finished=finished,
                        steps_evaluated=self.verdict.steps_evaluated,
                        steps_skipped=self.verdict.steps_skipped,
                        tensors_checked=self.verdict.tensors_checked,
                        unmatched=tuple(self.verdict.unmatched),
                    )
                )
        if finished:
            log.info("trainprobe: %s %s: %s: %s", self.kind, self.name, status, details)


def _remarks(rule: object) -> list[str]:
    """The rule's own remarks (``remarks()``, where it has one); a failing one says nothing."""
    remarks = getattr(rule, "remarks", None)
    if not callable(remarks):
        return []
    try:
        return [str(remark) for remark in remarks()]
    except Exception:
        log.exception("trainprobe: the remarks of %r failed", rule)
        return []
