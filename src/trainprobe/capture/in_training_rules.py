"""The in-training spike rules a hook runs, read from the job's configuration: framework-free.

Both hooks, PyTorch's and Keras's, judge ``LossSpike`` and ``GradientNormSpike`` inside the
training (see ``capture.spike_window`` for when a value is a spike), and both read them here.
What a hook is given is either the hook configuration file's ``TrainingRules`` (or a request's
``DebugRuleConfigurations``: every parameter a string, ``action_json`` plain JSON) or the SDK's
``Rule`` objects; both become ``SpikeRuleConfig`` records, their parameters checked, typed and
defaulted by the catalogue (``config.catalogue``: one place for the defaults) and their actions
read by ``config.actions.parse_actions``, so that a value the configuration refuses is refused
here too, with the same ConfigError naming the field.

What a rule does at a spike is one ``SpikeAction``: the strongest of its actions that decide
the step (``SkipStep``, ``Rollback``, ``StopTraining``); the others (Email, SMS, Webhook,
ProfileNextSteps) are the rule evaluator's. ``SkipBudget`` keeps the limit on skips: more than
``max_skips`` skips (or rollbacks) within ``max_skips_window`` updates stop the training instead.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from trainprobe.capture.spike_window import SpikeSettings
from trainprobe.config import catalogue
from trainprobe.config.actions import (
    Rollback,
    SkipStep,
    StopTraining,
    parse_actions,
    within_the_step,
)
from trainprobe.config.errors import ConfigError
from trainprobe.config.rules import Rule
from trainprobe.config.training_rules import training_rules
from trainprobe.storage.spike_records import SpikeAction

__all__ = ["SPIKE_RULES", "SkipBudget", "SpikeRuleConfig", "spike_rule_configs"]

SPIKE_RULES = ("LossSpike", "GradientNormSpike")
"""The rules a hook judges inside the training."""

_ACTIONS = {
    SkipStep: SpikeAction.SKIP,
    Rollback: SpikeAction.ROLLBACK,
    StopTraining: SpikeAction.STOP,
}


@dataclass(frozen=True)
class SpikeRuleConfig:
    """One configured in-training rule: what it judges, when a value spikes, what it does."""

    name: str
    """The rule configuration's name (the rule's own unless the job named it otherwise)."""
    rule: str
    """``LossSpike`` or ``GradientNormSpike``."""
    settings: SpikeSettings
    max_skips: int
    max_skips_window: int
    action: SpikeAction = SpikeAction.NONE
    rollback: Rollback | None = None
    """The rollback's steps and learning-rate factor, when the action is a rollback."""

    @property
    def judges_loss(self) -> bool:
        """Whether it judges the step's loss (else the norm of the update's gradients)."""
        return self.rule == "LossSpike"


def spike_rule_configs(rules: Iterable[Mapping[str, Any] | Rule]) -> list[SpikeRuleConfig]:
    """The in-training rules among ``rules``: configuration entries
    (``{"RuleConfigurationName", "RuleName" or RuleParameters' "rule_to_invoke",
    "RuleParameters"}``) or SDK ``Rule`` objects (numbered after the entries); the other rules
    are left out. ConfigError names a bad field, as the configuration does."""
    given = list(rules)
    objects = [rule for rule in given if isinstance(rule, Rule)]
    entries: list[object] = [rule for rule in given if not isinstance(rule, Rule)]
    found = []
    for index, entry in enumerate([*entries, *training_rules(objects)]):
        where = f"TrainingRules[{index}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(where, entry, "a rule configuration object")
        parameters = entry.get("RuleParameters") or {}
        if not isinstance(parameters, Mapping):
            raise ConfigError(f"{where}.RuleParameters", parameters, "a map of strings")
        rule = entry.get("RuleName") or parameters.get("rule_to_invoke")
        if rule not in SPIKE_RULES:
            continue
        name = str(entry.get("RuleConfigurationName") or rule)
        found.append(_config(str(rule), name, parameters, f"{where}.RuleParameters"))
    return found


def _config(rule: str, name: str, parameters: Mapping[str, Any], where: str) -> SpikeRuleConfig:
    """One rule, its parameters and their defaults the catalogue's."""
    values = catalogue.get(rule).effective_parameters(parameters, field_prefix=where)
    action, rollback = SpikeAction.NONE, None
    text = parameters.get("action_json")
    if text is not None and text != "":
        for found in within_the_step(parse_actions(text, field=f"{where}.action_json")):
            if isinstance(found, Rollback):
                rollback = found
            if _ACTIONS[type(found)].strength > action.strength:
                action = _ACTIONS[type(found)]
    return SpikeRuleConfig(
        name=name,
        rule=rule,
        settings=SpikeSettings.of(values),
        max_skips=cast(int, values["max_skips"]),
        max_skips_window=cast(int, values["max_skips_window"]),
        action=action,
        rollback=rollback if action is SpikeAction.ROLLBACK else None,
    )


class SkipBudget:
    """The limit on a rule's skips: at most ``max_skips`` within ``window`` updates."""

    def __init__(self, max_skips: int, window: int) -> None:
        self.max_skips = max_skips
        self.window = window
        self._skips: deque[int] = deque()

    def allows_another(self, update: int) -> bool:
        """Note a skip at ``update``; False when it is one too many for the window."""
        self._skips.append(update)
        while self._skips and self._skips[0] <= update - self.window:
            self._skips.popleft()
        return len(self._skips) <= self.max_skips

    def too_many(self, rule: str) -> str:
        """What the log says when ``rule`` stops the training instead of skipping."""
        return (
            f"{rule} skipped more than {self.max_skips} of the last {self.window} updates; it "
            "stops the training instead"
        )
