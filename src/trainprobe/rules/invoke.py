"""``invoke_rule``: smdebug's way of running a rule by hand, in a notebook or a script.

``invoke_rule(rule, start_step=0, end_step=None, raise_eval_cond=False)`` evaluates ``rule`` on
its base trial's saved steps (not every integer, as smdebug did), waiting for new ones while the
job runs, and returns once the job has ended and every step is read (smdebug raised NoMoreData
there). A step whose data is missing is skipped. When the condition is met, the rule's actions
(its ``action_str``) run once, then RuleEvaluationConditionMet is raised if ``raise_eval_cond``,
else logged; ``end_of_rule`` stops the loop. Where logging is not configured (a notebook), what
is logged at INFO is printed, as smdebug's own logger printed it.

The runner (``trainprobe.rules.runner``) does the same for configured rules and also writes
their status and output.
"""

from __future__ import annotations

import logging
import time

from trainprobe.analysis.exceptions import (
    NoMoreData,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from trainprobe.rules.actions import Notice, RuleActions
from trainprobe.rules.rule import (
    InsufficientInformationForRuleInvocation,
    Rule,
    RuleEvaluationConditionMet,
    take_evidence,
)

__all__ = ["invoke_rule"]

log = logging.getLogger(__name__)

_POLL_INTERVAL = 0.2
_SKIPPED = (
    TensorUnavailable,
    TensorUnavailableForStep,
    StepUnavailable,
    NoMoreData,
    InsufficientInformationForRuleInvocation,
)


def _say(message: str) -> None:
    if log.isEnabledFor(logging.INFO) and log.hasHandlers():
        log.info("%s", message)
    else:
        print(message, flush=True)


def invoke_rule(
    rule_obj: Rule,
    start_step: int = 0,
    end_step: int | None = None,
    raise_eval_cond: bool = False,
) -> None:
    """Evaluate ``rule_obj`` on every saved step from ``start_step`` up to ``end_step``
    (excluded); see the module documentation."""
    trial = rule_obj.base_trial
    actions = RuleActions.from_config(rule_obj.action_str, out_dir=trial.path)
    fired = False
    last = start_step - 1
    while True:
        ended = trial.loaded_all_steps
        pending = [step for step in trial.steps() if step > last]
        for step in pending:
            if end_step is not None and step >= end_step:
                return
            last = step
            try:
                rule_obj.invoke(step)
            except _SKIPPED as skipped:
                log.debug("trainprobe: %s: step %d skipped: %s", rule_obj.rule_name, step, skipped)
            except RuleEvaluationConditionMet as met:
                evidence = tuple(take_evidence(rule_obj))
                if not fired and len(actions):
                    where = rule_obj.step_words(step)
                    actions.run(Notice(rule_obj.rule_name, trial.path, step, evidence, where=where))
                fired = True
                if raise_eval_cond:
                    raise
                _say(f"trainprobe: {met}")
                if met.end_of_rule:
                    return
            take_evidence(rule_obj)
        if ended and not pending:
            if not fired:
                _say(
                    f"trainprobe: {rule_obj.rule_name}: the condition was not met up to "
                    f"{rule_obj.step_words(last)}"
                )
            return
        time.sleep(_POLL_INTERVAL)
