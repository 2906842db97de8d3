"""One way to find a job: from its name, its directory, or any of its outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainprobe.config.errors import ConfigError
from trainprobe.jobs import JobRecord, JobStore
from trainprobe.jobs.errors import JobNotFound
from trainprobe.jobs.operations.locate import locate_job
from trainprobe.storage.job_layout import job_dir_of, rule_output_dir, rule_report_file


def _job(tmp_path: Path) -> Path:
    job = tmp_path / "out" / "mnist-1"
    for part in ("debug-output", "profiler-output/system", "rule-output/ProfilerReport-1"):
        (job / part).mkdir(parents=True)
    return job


def test_every_path_into_a_job_finds_the_same_job(tmp_path: Path) -> None:
    job = _job(tmp_path)
    rule = job / "rule-output" / "ProfilerReport-1"
    for path in (job, job / "debug-output", job / "profiler-output", rule):
        layout = locate_job(str(path))
        assert layout.job_dir == str(job)
        assert layout.debug_output == str(job / "debug-output")
        assert layout.profiler_output == str(job / "profiler-output")
    assert job_dir_of(str(rule)) == (str(job), str(rule))
    assert job_dir_of(str(job)) == (str(job), None)
    assert rule_output_dir(str(job), "ProfilerReport-1") == str(rule)
    assert rule_report_file(str(rule), "CPUBottleneck") == str(
        rule / "profiler-output" / "profiler-reports" / "CPUBottleneck.json"
    )


def test_a_name_is_looked_up_in_the_job_store(tmp_path: Path) -> None:
    job = _job(tmp_path)
    store = JobStore(tmp_path / "jobs.sqlite")
    store.insert(
        JobRecord(
            name="mnist-1",
            arn="arn:aws:sagemaker:local:000000000000:training-job/mnist-1",
            request={"TrainingJobName": "mnist-1"},
            job_dir=str(job),
            status="Completed",
            secondary_status="Completed",
            creation_time=100.0,
            last_modified_time=100.0,
        )
    )
    assert locate_job("mnist-1", store).profiler_output == str(job / "profiler-output")
    with pytest.raises(JobNotFound, match="mnist-2"):
        locate_job("mnist-2", store)


def test_a_directory_outside_any_job_is_refused_by_name(tmp_path: Path) -> None:
    elsewhere = tmp_path / "photos"
    elsewhere.mkdir()
    with pytest.raises(ConfigError, match=r"photos.*a job's name, a job's directory"):
        locate_job(str(elsewhere))
