"""``smdebug.profiler.analysis.notebook_utils.training_job``: ``TrainingJob``, for a local job.

``TrainingJob(name)`` finds the job in trainprobe's job store (as smdebug's asked SageMaker) and
knows where its profiler output is; ``TrainingJob(path)`` takes a job directory (or a copy of
one downloaded from S3) as it is. ``profiler_config`` is the job's ProfilerConfig as
DescribeTrainingJob gives it (from a job directory, its ``config/profilerconfig.json``; None
when the copy has none), whose ``ProfilingParameters`` the notebooks read.
``get_systems_metrics_reader()`` and ``get_framework_metrics_reader()`` give the readers the
charts take.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from trainprobe.analysis.profiling_data.metrics_readers import (
    LocalAlgorithmMetricsReader,
    LocalSystemMetricsReader,
)
from trainprobe.analysis.profiling_data.pandas_frame import PandasFrame
from trainprobe.jobs import JobStore, describe_training_job
from trainprobe.jobs.operations.describe import find_job, layout_of
from trainprobe.storage.job_layout import PROFILER_OUTPUT, JobLayout

__all__ = ["TrainingJob"]

_POLL_SECONDS = 2.0


class TrainingJob:
    """A training job's profiler output: ``profiler_s3_output_path`` and its readers."""

    def __init__(self, training_job_name: str, region: str | None = None) -> None:
        self.name = training_job_name
        self.profiler_config: dict[str, Any] | None = None
        if os.path.isdir(os.path.join(training_job_name, PROFILER_OUTPUT)):
            self.profiler_s3_output_path = os.path.join(training_job_name, PROFILER_OUTPUT)
            directory = os.path.abspath(training_job_name)
            self.name = os.path.basename(directory)
            self.profiler_config = _profiler_config_in(directory)
        else:
            description = self.describe_training_job()
            self.profiler_config = description.get("ProfilerConfig")
            record = find_job(JobStore(), {"TrainingJobName": self.name})
            self.profiler_s3_output_path = layout_of(record).profiler_output
        print(f"ProfilerConfig:{self.profiler_config}")
        print(f"s3 path:{self.profiler_s3_output_path}")

    def describe_training_job(self) -> dict[str, Any]:
        """The job's DescribeTrainingJob response."""
        return describe_training_job({"TrainingJobName": self.name})

    def _wait_for(self, what: str) -> None:
        while not os.path.isdir(os.path.join(self.profiler_s3_output_path, what)):
            time.sleep(_POLL_SECONDS)

    def wait_for_sys_profiling_data_to_be_available(self) -> None:
        """Return once the job's system metrics have started to appear."""
        self._wait_for("system")

    def wait_for_framework_profiling_data_to_be_available(self) -> None:
        """Return once the job's framework metrics have started to appear."""
        self._wait_for("framework")

    def get_systems_metrics_reader(self) -> LocalSystemMetricsReader:
        """The reader of the job's system metrics, for the charts."""
        return LocalSystemMetricsReader(self.profiler_s3_output_path)

    def get_framework_metrics_reader(self) -> LocalAlgorithmMetricsReader:
        """The reader of the job's framework metrics (its step timeline), for the charts."""
        return LocalAlgorithmMetricsReader(self.profiler_s3_output_path)

    def get_pandas_frame(self) -> PandasFrame:
        """The profiler output as smdebug's ``PandasFrame``."""
        return PandasFrame(self.profiler_s3_output_path)


def _profiler_config_in(directory: str) -> dict[str, Any] | None:
    """The ProfilerConfig of the job in ``directory``, as DescribeTrainingJob gives it (the
    file the job's processes read holds the container's ``LocalPath`` in its place)."""
    layout = JobLayout.for_job(os.path.basename(directory), os.path.dirname(directory))
    try:
        with open(layout.profiler_config_file, encoding="utf-8") as file:
            config = json.load(file)
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    parameters = config.get("ProfilingParameters")
    if isinstance(parameters, dict):
        config["ProfilingParameters"] = {
            key: value for key, value in parameters.items() if key != "LocalPath"
        }
    if not config.get("DisableProfiler"):
        config["S3OutputPath"] = os.path.dirname(directory)
    return config
