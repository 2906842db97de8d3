"""The errors of the job operations, each carrying the error code SageMaker's API answers with.

They are ConfigErrors (so ValueErrors): each names the field, the value and what is allowed. An
HTTP front end maps ``error_code`` to SageMaker's error name (``ValidationException``,
``ResourceInUse``, ``InternalFailure``).
"""

from __future__ import annotations

from trainprobe.config.errors import ConfigError
from trainprobe.errors import JobError

__all__ = ["JobNameInUse", "JobNotFound", "JobOperationError", "JobStartError", "JobStateError"]


class JobOperationError(ConfigError, JobError):
    """A job operation that cannot be done as asked."""

    error_code = "ValidationException"


class JobNotFound(JobOperationError):
    """No job has the name given (SageMaker: ValidationException, "Requested resource not
    found")."""


class JobNameInUse(JobOperationError):
    """A job of that name exists already: job names are unique (SageMaker: ResourceInUse)."""

    error_code = "ResourceInUse"


class JobStateError(JobOperationError):
    """The job is not in a status that allows the operation (stopping a finished job, say)."""


class JobStartError(JobOperationError):
    """The job could not be made or started (its files, its runner): nothing of it was kept, so
    the same request may be sent again (SageMaker: InternalFailure)."""

    error_code = "InternalFailure"
