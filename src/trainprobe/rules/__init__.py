"""The rule engine, the built-in debugging and profiler rules, custom rules and actions.

``from trainprobe.rules import Rule`` is the base class of custom rules (smdebug's
``from smdebug.rules import Rule``); ``invoke_rule`` runs one by hand, as smdebug's did. The
runner, which follows a job and writes each rule's status and output, is
``trainprobe.rules.runner``.
"""

from __future__ import annotations

from trainprobe.rules.invoke import invoke_rule
from trainprobe.rules.rule import (
    Evidence,
    InsufficientInformationForRuleInvocation,
    RequiredTensors,
    Rule,
    RuleEvaluationConditionMet,
)

__all__ = [
    "Evidence",
    "InsufficientInformationForRuleInvocation",
    "RequiredTensors",
    "Rule",
    "RuleEvaluationConditionMet",
    "invoke_rule",
]
