"""``smdebug.pytorch.hook``: ``Hook``."""

from trainprobe.capture.pytorch import Hook

__all__ = ["Hook"]
