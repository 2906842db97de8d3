"""``estimator.sagemaker_session``: the SDK's session, for the jobs of this machine.

SageMaker notebooks poll a job through ``estimator.sagemaker_session.sagemaker_client``, the
boto3 SageMaker client; here that client answers for local jobs, with boto3's keyword arguments
and SageMaker's response shapes::

    client = estimator.sagemaker_session.sagemaker_client
    client.describe_training_job(TrainingJobName=job_name)["TrainingJobStatus"]
    client.list_training_jobs(StatusEquals="InProgress")
    client.update_training_job(TrainingJobName=job_name, ProfilerConfig={...})
    client.stop_training_job(TrainingJobName=job_name)
"""

from __future__ import annotations

from typing import Any

from trainprobe.jobs import (
    JobStore,
    default_output_root,
    describe_training_job,
    list_training_jobs,
    stop_training_job,
    update_training_job,
)

__all__ = ["LocalSageMakerClient", "LocalSession"]


class LocalSageMakerClient:
    """The part of boto3's SageMaker client that training jobs use, for local jobs."""

    def __init__(self, store: JobStore) -> None:
        self._store = store

    def describe_training_job(self, **request: Any) -> dict[str, Any]:
        """DescribeTrainingJob (``TrainingJobName=``)."""
        return describe_training_job(request, store=self._store)

    def list_training_jobs(self, **request: Any) -> dict[str, Any]:
        """ListTrainingJobs (``StatusEquals=``, ``NameContains=``, ``MaxResults=``, ...)."""
        return list_training_jobs(request, store=self._store)

    def stop_training_job(self, **request: Any) -> dict[str, Any]:
        """StopTrainingJob (``TrainingJobName=``)."""
        stop_training_job(request, store=self._store)
        return {}

    def update_training_job(self, **request: Any) -> dict[str, Any]:
        """UpdateTrainingJob (``TrainingJobName=``, ``ProfilerConfig=``, ...)."""
        return update_training_job(request, store=self._store)


class LocalSession:
    """The SDK's ``Session``, as far as an estimator's user reaches into it."""

    boto_region_name = "local"

    def __init__(self, store: JobStore | None = None) -> None:
        self.store = store if store is not None else JobStore()
        self.sagemaker_client = LocalSageMakerClient(self.store)

    def default_bucket(self) -> str:
        """Where jobs write when no ``output_path`` is given (the SDK's default bucket)."""
        return default_output_root()

    def describe_training_job(self, job_name: str) -> dict[str, Any]:
        """The SDK session's shortcut for DescribeTrainingJob."""
        return self.sagemaker_client.describe_training_job(TrainingJobName=job_name)
