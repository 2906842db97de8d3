"""``smdebug.trials.local_trial``: ``LocalTrial(name, dirname, ...)``, a trial of a directory."""

from trainprobe.analysis.local_trial import LocalTrial

__all__ = ["LocalTrial"]
