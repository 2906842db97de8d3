"""``TrainingRules``: the rules a job's training judges itself, on every step, inside the step.

A job writes its ``DebugHookConfig`` into a file the training's hook reads
(``trainprobe.jobs.launch_plan``). trainprobe adds one member to it, which SageMaker's file does
not have (smdebug's hook ignores it): one entry per rule configuration of the job whose rule the
hook judges inside the training (``LossSpike``, ``GradientNormSpike``)::

    "TrainingRules": [
      {"RuleConfigurationName": "LossSpike", "RuleName": "LossSpike",
       "RuleParameters": {"window": "128", "sigma": "6.0", "warmup_steps": "20", "ratio": "0.0",
                          "max_skips": "10", "max_skips_window": "100",
                          "action_json": "[{\\"name\\": \\"SkipStep\\"}]"}}]

Every parameter is there, its default filled in, as a string (a parameter without a value is
left out). ``action_json`` is plain JSON, a list with each action named by its class (SkipStep,
Rollback, StopTraining, Email, ...): ``trainprobe.config.actions.parse_actions`` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trainprobe.config.actions import Action, ActionList
from trainprobe.config.catalogue.model import format_value
from trainprobe.config.rules import Rule

__all__ = ["TRAINING_RULES", "training_rules"]

TRAINING_RULES = "TrainingRules"
"""The hook configuration's member that lists them."""


def training_rules(rules: Sequence[Rule]) -> list[dict[str, Any]]:
    """The ``TrainingRules`` entries for a job's debugging ``rules``: those the hook judges."""
    entries = []
    for rule in rules:
        spec = rule.spec
        if spec is None or not spec.in_training:
            continue
        parameters = {
            name: format_value(value)
            for name, value in rule.effective_parameters.items()
            if value is not None
        }
        if rule.actions is not None:
            parameters["action_json"] = _plain_json(rule.actions)
        entries.append(
            {
                "RuleConfigurationName": rule.name,
                "RuleName": spec.name,
                "RuleParameters": parameters,
            }
        )
    return entries


def _plain_json(actions: Action | ActionList) -> str:
    listed = list(actions) if isinstance(actions, ActionList) else [actions]
    return json.dumps(
        [
            {"name": type(action).__name__}
            | {key: value for key, value in action.action_parameters.items() if key != "name"}
            for action in listed
        ]
    )
