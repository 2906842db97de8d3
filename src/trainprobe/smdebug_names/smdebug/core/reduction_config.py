"""``smdebug.core.reduction_config``: ``ReductionConfig``."""

from trainprobe.capture.reduction_config import ReductionConfig

__all__ = ["ReductionConfig"]
