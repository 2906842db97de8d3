"""The job runner: SageMaker's training job operations, run on this machine.

Each operation takes SageMaker's request as a dict and returns SageMaker's response as a dict
(times as aware datetimes, as boto3 gives them)::

    from trainprobe import jobs

    jobs.create_training_job({"TrainingJobName": "mnist-1", "AlgorithmSpecification":
        {"ContainerEntrypoint": ["train.py"]}, "DebugRuleConfigurations": [...], ...})
    jobs.describe_training_job({"TrainingJobName": "mnist-1"})["TrainingJobStatus"]
    jobs.update_training_job({"TrainingJobName": "mnist-1",
                              "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 100}})
    jobs.profile_training_job({"TrainingJobName": "mnist-1", "Steps": 2})  # the flight recorder
    jobs.stop_training_job({"TrainingJobName": "mnist-1"})
    jobs.list_training_jobs({"StatusEquals": "InProgress", "SortOrder": "Descending"})

Jobs are kept in a SQLite job store (``JobStore``, by default ``$TRAINPROBE_HOME/jobs.sqlite``);
every operation takes ``store=`` to use another. Each job is run by a runner process of its own
(``trainprobe.jobs.runner``), which starts the training with the hook, the system monitor and
one evaluator per rule, and stops the training when a rule's StopTraining action, a
StopTrainingJob or MaxRuntimeInSeconds says so. Its files are laid out as on SageMaker
(``JobLayout``). Errors are ConfigErrors (JobNotFound, JobNameInUse, JobStateError).

The package holds four concerns: the operations (``operations/``), the HTTP server behind
``trainprobe serve`` (``server/``), the job runner (``runner/``) and what runs inside a job's
child processes (``processes/``); what all of them use stays here: the job store (``store``),
the operations' errors (``errors``), the launch plan decided at creation (``launch_plan``), what
the job runs (``entry_point``) and how a child process is started and stopped
(``child_process``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainprobe.config.sdk_request import (
        job_name_from_base,
        with_default_profiler_rule,
        with_rule_collections,
    )
    from trainprobe.jobs.errors import (
        JobNameInUse,
        JobNotFound,
        JobOperationError,
        JobStateError,
    )
    from trainprobe.jobs.operations.control import (
        profile_training_job,
        stop_training_job,
        update_training_job,
    )
    from trainprobe.jobs.operations.create import create_training_job, default_output_root
    from trainprobe.jobs.operations.describe import describe_training_job
    from trainprobe.jobs.operations.listing import list_training_jobs
    from trainprobe.jobs.store import JobRecord, JobStore, trainprobe_home
    from trainprobe.storage.job_layout import JobLayout

# Each name is imported from its module when first asked for: importing one module of the
# package (``trainprobe.jobs.operations.create``, as ``trainprobe jobs create`` does) does not
# import every operation's (DescribeTrainingJob reads rule statuses with the rules' code).
_MODULES = {
    "profile_training_job": "trainprobe.jobs.operations.control",
    "stop_training_job": "trainprobe.jobs.operations.control",
    "update_training_job": "trainprobe.jobs.operations.control",
    "describe_training_job": "trainprobe.jobs.operations.describe",
    "JobNameInUse": "trainprobe.jobs.errors",
    "JobNotFound": "trainprobe.jobs.errors",
    "JobOperationError": "trainprobe.jobs.errors",
    "JobStateError": "trainprobe.jobs.errors",
    "create_training_job": "trainprobe.jobs.operations.create",
    "default_output_root": "trainprobe.jobs.operations.create",
    "list_training_jobs": "trainprobe.jobs.operations.listing",
    "job_name_from_base": "trainprobe.config.sdk_request",
    "with_default_profiler_rule": "trainprobe.config.sdk_request",
    "with_rule_collections": "trainprobe.config.sdk_request",
    "JobRecord": "trainprobe.jobs.store",
    "JobStore": "trainprobe.jobs.store",
    "trainprobe_home": "trainprobe.jobs.store",
    "JobLayout": "trainprobe.storage.job_layout",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
    "profile_training_job",
    "stop_training_job",
    "trainprobe_home",
    "update_training_job",
    "with_default_profiler_rule",
    "with_rule_collections",
]
