"""``smdebug.rules``: the base class of custom rules and ``invoke_rule``."""

from trainprobe.rules.invoke import invoke_rule
from trainprobe.rules.rule import RequiredTensors, RequiredTensorsForTrial, Rule

__all__ = ["RequiredTensors", "RequiredTensorsForTrial", "Rule", "invoke_rule"]
