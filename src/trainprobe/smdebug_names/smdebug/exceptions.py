"""``smdebug.exceptions``: the errors a trial or a rule raises, by smdebug's names.

The trial's errors are ``trainprobe.analysis.exceptions``'s; ``SMDebugError`` is trainprobe's root,
``TrainprobeError``: ``except SMDebugError`` catches what trainprobe raises on purpose.
"""

from trainprobe.analysis import exceptions as _trial_exceptions
from trainprobe.analysis.exceptions import *  # noqa: F403
from trainprobe.errors import TrainprobeError
from trainprobe.rules.rule import (
    InsufficientInformationForRuleInvocation,
    RuleEvaluationConditionMet,
)

SMDebugError = TrainprobeError

__all__ = [
    *_trial_exceptions.__all__,
    "InsufficientInformationForRuleInvocation",
    "RuleEvaluationConditionMet",
    "SMDebugError",
]
