"""``smdebug.exceptions``: the errors a trial or a rule raises, by smdebug's names.

``SMDebugError`` is trainprobe's root, ``TrainprobeError``: ``except SMDebugError`` catches what
trainprobe raises on purpose.
"""

from trainprobe.analysis.exceptions import (
    IndexReaderException,
    InvalidWorker,
    MissingCollectionFiles,
    NoMoreData,
    ShapeUnavailableForStep,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from trainprobe.errors import TrainprobeError
from trainprobe.rules.rule import (
    InsufficientInformationForRuleInvocation,
    RuleEvaluationConditionMet,
)

SMDebugError = TrainprobeError

__all__ = [
    "IndexReaderException",
    "InsufficientInformationForRuleInvocation",
    "InvalidWorker",
    "MissingCollectionFiles",
    "NoMoreData",
    "RuleEvaluationConditionMet",
    "SMDebugError",
    "ShapeUnavailableForStep",
    "StepNotYetAvailable",
    "StepUnavailable",
    "TensorUnavailable",
    "TensorUnavailableForStep",
]
