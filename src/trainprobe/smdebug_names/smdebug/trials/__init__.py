"""``smdebug.trials``: ``create_trial``, ``Trial`` and ``LocalTrial``."""

from trainprobe.analysis.trial import Trial
from trainprobe.smdebug_names.smdebug.trials.local_trial import LocalTrial
from trainprobe.smdebug_names.smdebug.trials.utils import create_trial

__all__ = ["LocalTrial", "Trial", "create_trial"]
