"""What every rule's run keeps, debugging or profiler rule alike: its verdict, its status as
SageMaker reports it (written to ``status.json`` as it changes), and its actions on a first issue.

A run that an earlier process began and did not finish (it was killed, or ran out of memory) is
taken up with ``take_up``: the rule evaluates again what that process evaluated, so that its state
(the losses a loss rule keeps, what a profiler report counted) is what it was, but those
evaluations are not written again, and its actions, if that process ran them, do not run again.

A rule may say what it did not judge and why (a built-in rule's ``remarks()``: tensors it set
aside); its final status ends with those sentences, whatever the status.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from trainprobe.config.statuses import RuleEvaluationStatus
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
        self._written_until: int | None = None
        """The last step (window) an earlier process evaluated and wrote (see ``take_up``)."""
        self._acted = False

    def take_up(self) -> None:
        """Take up the run an earlier process began and did not finish (see the module
        docstring); before ``begin``."""
        if self._writer is None:
            return
        earlier = self._writer.take_up()
        self._written_until = earlier.last_evaluated
        self._acted = earlier.acted

    def _written_before(self, step: int) -> bool:
        """Whether the evaluation of ``step`` (a window's number) was written by an earlier
        process: it is evaluated again only to bring the rule's state back."""
        return self._written_until is not None and step <= self._written_until

    def _write_evaluation(self, step: int, line: dict[str, Any]) -> None:
        """Append the evaluation of ``step`` to the rule's output, unless written already."""
        if self._writer is not None and not self._written_before(step):
            self._writer.append_evaluation(line)

    @property
    def name(self) -> str:
        """The rule configuration name."""
        return self.verdict.name

    def stop(self) -> None:
        """Say the rule is stopping (the runner finishes it as Stopped)."""
        self._set_status(STOPPING, "stop requested")

    def finish(self, status: RuleEvaluationStatus, details: str) -> None:
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
        if not len(self._actions) or self._acted:
            return
        self._acted = True
        for outcome in self._actions.run(notice):
            self.verdict.actions.append(outcome)
            if self._writer is not None:
                self._writer.append_action({where: evaluation.step, **outcome.to_json()})

    def _set_status(
        self, status: RuleEvaluationStatus, details: str, *, finished: bool = False
    ) -> None:
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
