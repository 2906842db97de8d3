"""``smdebug.pytorch.collection``: ``Collection``."""

from trainprobe.capture.collections import Collection

__all__ = ["Collection"]
