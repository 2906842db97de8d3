"""The in-training spike rules a hook runs, read from the job's configuration: framework-free.

A hook judges ``LossSpike`` and ``GradientNormSpike`` inside the training (see
``capture.spike_window`` for when a value is a spike). What it is given is either the hook
configuration file's ``TrainingRules`` (``config.training_rules``: every parameter as a string,
``action_json`` as plain JSON) or the SDK's ``Rule`` objects; both become ``SpikeRuleConfig``
records here, the parameters checked, typed and defaulted by the catalogue
(``config.catalogue``: one place for their defaults) and the actions read by
``config.actions.parse_actions``, so that a value the configuration refuses is refused here too,
with the same ConfigError naming the field.

What the rule does at a spike is one ``SpikeAction``: the strongest of the actions that decide
the step (``SkipStep``, ``Rollback``, ``StopTraining``); the others (Email, SMS, Webhook,
ProfileNextSteps) are the rule evaluator's. ``SkipBudget`` keeps the limit on skips: more than
``max_skips`` skips (or rollbacks) within ``max_skips_window`` updates stop the training instead.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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

__all__ = ["SPIKE_RULE_NAMES", "SkipBudget", "SpikeAction", "SpikeRuleConfig", "spike_rule_configs"]

SPIKE_RULE_NAMES = ("LossSpike", "GradientNormSpike")
"""The rules a hook judges inside the training."""


class SpikeAction(enum.Enum):
    """What a rule does at a spike, before the spiking update (strongest last)."""

    NONE = "none"
    SKIP = "skip"
    ROLLBACK = "rollback"
    STOP = "stop"

    @property
    def strength(self) -> int:
        """The order in which actions win when several rules spike at one step."""
        return list(SpikeAction).index(self)


@dataclass(frozen=True)
class SpikeRuleConfig:
    """One configured in-training rule: what it judges, when a value spikes, what it does."""

    name: str
    """The rule configuration's name (the rule's own unless the job named it otherwise)."""
    rule: str
    """``LossSpike`` or ``GradientNormSpike``."""
    settings: SpikeSettings
    action: SpikeAction = SpikeAction.NONE
    max_skips: int = 10
    max_skips_window: int = 100
    rollback_steps: int = 50
    lr_factor: float = 1.0

    @property
    def judges_loss(self) -> bool:
        """Whether it judges the step's loss (else the norm of the update's gradients)."""
        return self.rule == "LossSpike"


def spike_rule_configs(rules: Iterable[Mapping[str, Any] | Rule]) -> list[SpikeRuleConfig]:
    """The in-training rules among ``rules``: ``TrainingRules`` entries
    (``{"RuleConfigurationName", "RuleName" or RuleParameters' "rule_to_invoke",
    "RuleParameters"}``) or SDK ``Rule`` objects; the other rules are left out. ConfigError
    names a bad field."""
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
        if rule not in SPIKE_RULE_NAMES:
            continue
        name = str(entry.get("RuleConfigurationName") or rule)
        found.append(_config(str(rule), name, parameters, f"{where}.RuleParameters"))
    return found


def _config(rule: str, name: str, parameters: Mapping[str, Any], where: str) -> SpikeRuleConfig:
    spec = catalogue.get(rule)
    own = {key: value for key, value in parameters.items() if key in spec.parameter_names}
    values = spec.effective_parameters(own, field_prefix=where)
    settings = SpikeSettings(
        window=int(values["window"]),  # type: ignore[call-overload]
        sigma=float(values["sigma"]),  # type: ignore[arg-type]
        warmup=int(values["warmup_steps"]),  # type: ignore[call-overload]
        ratio=float(values["ratio"]),  # type: ignore[arg-type]
    )
    action, rollback = _deciding_action(parameters.get("action_json"), f"{where}.action_json")
    return SpikeRuleConfig(
        name=name,
        rule=rule,
        settings=settings,
        action=action,
        max_skips=int(values["max_skips"]),  # type: ignore[call-overload]
        max_skips_window=int(values["max_skips_window"]),  # type: ignore[call-overload]
        rollback_steps=rollback.steps if rollback is not None else 50,
        lr_factor=rollback.lr_factor if rollback is not None else 1.0,
    )


def _deciding_action(text: object, field: str) -> tuple[SpikeAction, Rollback | None]:
    """The strongest action that decides the step, and the Rollback among them, if any."""
    if text is None or text == "":
        return SpikeAction.NONE, None
    chosen, rollback = SpikeAction.NONE, None
    for action in within_the_step(parse_actions(text, field=field)):
        kind = _KINDS[type(action)]
        if isinstance(action, Rollback):
            rollback = action
        if kind.strength > chosen.strength:
            chosen = kind
    return chosen, rollback


_KINDS = {
    SkipStep: SpikeAction.SKIP,
    Rollback: SpikeAction.ROLLBACK,
    StopTraining: SpikeAction.STOP,
}


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
