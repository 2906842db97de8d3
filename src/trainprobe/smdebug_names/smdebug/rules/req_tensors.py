"""``smdebug.rules.req_tensors``: ``RequiredTensors`` and ``RequiredTensorsForTrial``."""

from trainprobe.rules.rule import RequiredTensors, RequiredTensorsForTrial

__all__ = ["RequiredTensors", "RequiredTensorsForTrial"]
