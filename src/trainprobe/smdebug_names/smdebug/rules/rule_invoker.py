"""``smdebug.rules.rule_invoker``: ``invoke_rule``."""

from trainprobe.rules.invoke import invoke_rule

__all__ = ["invoke_rule"]
