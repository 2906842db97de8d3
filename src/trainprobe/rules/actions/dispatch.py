"""Turning a rule's ``action_json`` into runnable actions, and running them when it fires.

Actions run after the verdict is written, StopTraining first. A failing action (no SMTP server
configured, a gateway that answers 500, ...) is logged and comes back as an ActionOutcome with
``ok=False``; it never changes the verdict and never stops the other actions.
"""

from __future__ import annotations

import logging
from typing import Protocol

from trainprobe.config.actions import (
    SMS,
    Action,
    ActionList,
    Email,
    ProfileNextSteps,
    StopTraining,
    Webhook,
    after_the_step,
)
from trainprobe.rules.actions.notice import Notice
from trainprobe.rules.actions.outcome import ActionOutcome
from trainprobe.rules.actions.profile_next_steps import ProfileNextStepsAction
from trainprobe.rules.actions.sms_gateway import SmsAction
from trainprobe.rules.actions.smtp_email import EmailAction
from trainprobe.rules.actions.stop_training import StopTrainingAction, StopTrainingCallback
from trainprobe.rules.actions.webhook import WebhookAction

__all__ = ["RuleAction", "RuleActions"]

log = logging.getLogger(__name__)


class RuleAction(Protocol):
    """What every action offers: its kind, its target in words, and ``invoke``."""

    kind: str

    @property
    def target(self) -> str: ...

    def invoke(self, notice: Notice) -> str: ...


class RuleActions:
    """The actions of one rule, ready to run; build with ``from_config``."""

    def __init__(self, actions: list[RuleAction]) -> None:
        # StopTraining first: stopping a diverging job matters more than the messages.
        self.actions = sorted(actions, key=lambda action: action.kind != "stoptraining")

    @classmethod
    def from_config(
        cls,
        actions: str | Action | ActionList | None,
        *,
        out_dir: str,
        on_stop_training: StopTrainingCallback | None = None,
    ) -> RuleActions:
        """The runnable form of ``actions`` (an ``action_json`` string, an Action or an
        ActionList); ``out_dir`` is the tensor output the rule watches. Raises ConfigError for
        an action_json that does not parse."""
        if actions is None or (isinstance(actions, str) and not actions.strip()):
            return cls([])
        # SkipStep and Rollback act inside the training step: the hook carries them out.
        actions = after_the_step(actions)
        if actions is None:
            return cls([])
        listed = list(actions) if isinstance(actions, ActionList) else [actions]
        return cls([_runnable(action, out_dir, on_stop_training) for action in listed])

    def __len__(self) -> int:
        return len(self.actions)

    def run(self, notice: Notice) -> list[ActionOutcome]:
        """Run every action for ``notice``; one outcome each, failures included."""
        outcomes = []
        for action in self.actions:
            try:
                detail = action.invoke(notice)
            except Exception as error:
                detail = f"{type(error).__name__}: {error}"
                log.warning(
                    "trainprobe: rule %s: the %s action to %s failed: %s",
                    notice.rule,
                    action.kind,
                    action.target,
                    detail,
                )
                outcomes.append(ActionOutcome(action.kind, action.target, False, detail))
            else:
                log.info("trainprobe: rule %s: %s action: %s", notice.rule, action.kind, detail)
                outcomes.append(ActionOutcome(action.kind, action.target, True, detail))
        return outcomes


def _runnable(
    action: Action, out_dir: str, on_stop_training: StopTrainingCallback | None
) -> RuleAction:
    parameters = action.action_parameters
    if isinstance(action, StopTraining):
        prefix = parameters.get("training_job_prefix")
        return StopTrainingAction(out_dir, prefix, on_stop_training)
    if isinstance(action, Email):
        return EmailAction(parameters["endpoint"])
    if isinstance(action, SMS):
        return SmsAction(parameters["endpoint"])
    if isinstance(action, Webhook):
        return WebhookAction(parameters["endpoint"])
    if isinstance(action, ProfileNextSteps):
        return ProfileNextStepsAction(out_dir, action.steps)
    raise TypeError(f"no runnable form for {action!r}")
