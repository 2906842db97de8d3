"""Local ARNs: SageMaker's resource names, in a region called ``local`` of account 000000000000.

Code that parses ARNs (``arn:aws:sagemaker:<region>:<account>:training-job/<name>``) reads them
as it reads SageMaker's; as there, the name part is in lower case.
"""

from __future__ import annotations

__all__ = ["rule_evaluation_job_arn", "training_job_arn"]

_PREFIX = "arn:aws:sagemaker:local:000000000000"


def training_job_arn(name: str) -> str:
    """The ARN of the training job ``name``."""
    return f"{_PREFIX}:training-job/{name.lower()}"


def rule_evaluation_job_arn(job_name: str, rule_name: str) -> str:
    """The ARN of the evaluation of rule ``rule_name`` for job ``job_name`` (SageMaker runs each
    rule as a processing job)."""
    return f"{_PREFIX}:processing-job/{job_name.lower()}-{rule_name.lower()}"
