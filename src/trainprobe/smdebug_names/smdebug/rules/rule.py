"""``smdebug.rules.rule``: ``Rule``, the base class of custom rules."""

from trainprobe.rules.rule import Rule

__all__ = ["Rule"]
