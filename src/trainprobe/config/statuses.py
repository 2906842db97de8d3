"""SageMaker's statuses: a training job's, its secondary status, and a rule evaluation's.

Each is a ``StrEnum``: a member is the very string SageMaker's API sends (``"InProgress"``), so
it goes into JSON, the job store and a comparison with a response's value unchanged, and code
names the status instead of spelling it.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "TERMINAL_JOB_STATUSES",
    "TERMINAL_SECONDARY_STATUSES",
    "UNFINISHED_RULE_STATUSES",
    "RuleEvaluationStatus",
    "SecondaryStatus",
    "TrainingJobStatus",
]


class TrainingJobStatus(StrEnum):
    """DescribeTrainingJob's ``TrainingJobStatus`` (ListTrainingJobs' ``StatusEquals``)."""

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    DELETING = "Deleting"


class SecondaryStatus(StrEnum):
    """The ``SecondaryStatus`` values a local job goes through (SageMaker has more, for its
    instances and images)."""

    STARTING = "Starting"
    TRAINING = "Training"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"
    COMPLETED = "Completed"
    FAILED = "Failed"


class RuleEvaluationStatus(StrEnum):
    """A rule's ``RuleEvaluationStatus`` (DebugRuleEvaluationStatuses and
    ProfilerRuleEvaluationStatuses)."""

    IN_PROGRESS = "InProgress"
    NO_ISSUES_FOUND = "NoIssuesFound"
    ISSUES_FOUND = "IssuesFound"
    ERROR = "Error"
    STOPPING = "Stopping"
    STOPPED = "Stopped"


TERMINAL_JOB_STATUSES = frozenset(
    {TrainingJobStatus.COMPLETED, TrainingJobStatus.FAILED, TrainingJobStatus.STOPPED}
)
"""A job in one of these has ended and stays so."""

TERMINAL_SECONDARY_STATUSES = frozenset(
    {
        SecondaryStatus.COMPLETED,
        SecondaryStatus.FAILED,
        SecondaryStatus.STOPPED,
        SecondaryStatus.MAX_RUNTIME_EXCEEDED,
    }
)
"""The secondary statuses a job ends in (its last transition ends with it)."""

UNFINISHED_RULE_STATUSES = frozenset(
    {RuleEvaluationStatus.IN_PROGRESS, RuleEvaluationStatus.STOPPING}
)
"""A rule in one of these has not reached its verdict yet."""
