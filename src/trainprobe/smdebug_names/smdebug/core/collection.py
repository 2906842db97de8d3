"""``smdebug.core.collection``: ``Collection`` and ``CollectionKeys``."""

from trainprobe.capture.collections import Collection, CollectionKeys

__all__ = ["Collection", "CollectionKeys"]
