"""The job runner: SageMaker's training job operations, run on this machine.

Each operation takes SageMaker's request as a dict and returns SageMaker's response as a dict
(times as aware datetimes, as boto3 gives them)::

    from trainprobe import jobs

    jobs.create_training_job({"TrainingJobName": "mnist-1", "AlgorithmSpecification":
        {"ContainerEntrypoint": ["train.py"]}, "DebugRuleConfigurations": [...], ...})
    jobs.describe_training_job({"TrainingJobName": "mnist-1"})["TrainingJobStatus"]
    jobs.update_training_job({"TrainingJobName": "mnist-1",
                              "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 100}})
    jobs.stop_training_job({"TrainingJobName": "mnist-1"})
    jobs.list_training_jobs({"StatusEquals": "InProgress", "SortOrder": "Descending"})

Jobs are kept in a SQLite job store (``JobStore``, by default ``$TRAINPROBE_HOME/jobs.sqlite``);
every operation takes ``store=`` to use another. Each job is run by a runner process of its own
(``trainprobe.jobs.supervisor``), which starts the training with the hook, the system monitor
and one evaluator per rule, and stops the training when a rule's StopTraining action, a
StopTrainingJob or MaxRuntimeInSeconds says so. Its files are laid out as on SageMaker
(``JobLayout``). Errors are ConfigErrors (JobNotFound, JobNameInUse, JobStateError).
"""

from __future__ import annotations

from trainprobe.jobs.control import stop_training_job, update_training_job
from trainprobe.jobs.describe import describe_training_job
from trainprobe.jobs.errors import JobNameInUse, JobNotFound, JobOperationError, JobStateError
from trainprobe.jobs.launcher import create_training_job, default_output_root
from trainprobe.jobs.listing import list_training_jobs
from trainprobe.jobs.sdk_defaults import (
    job_name_from_base,
    with_default_profiler_rule,
    with_rule_collections,
)
from trainprobe.jobs.store import JobRecord, JobStore, trainprobe_home
from trainprobe.storage.job_layout import JobLayout

__all__ = [
    "JobLayout",
    "JobNameInUse",
    "JobNotFound",
    "JobOperationError",
    "JobRecord",
    "JobStateError",
    "JobStore",
    "create_training_job",
    "default_output_root",
    "describe_training_job",
    "job_name_from_base",
    "list_training_jobs",
    "stop_training_job",
    "trainprobe_home",
    "update_training_job",
    "with_default_profiler_rule",
    "with_rule_collections",
]
