"""``smdebug.trials.trial``: ``Trial``."""

from trainprobe.analysis.trial import Trial

__all__ = ["Trial"]
