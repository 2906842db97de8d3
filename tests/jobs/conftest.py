"""Each job test gets its own trainprobe home and job store; jobs left running are stopped."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainprobe.config.errors import ConfigError
from trainprobe.jobs import JobRecord, JobStore, list_training_jobs, stop_training_job


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobStore]:
    monkeypatch.setenv("TRAINPROBE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINPROBE_STOP_GRACE_SECONDS", "5")
    jobs = JobStore(tmp_path / "home" / "jobs.sqlite")
    yield jobs
    running = list_training_jobs({"StatusEquals": "InProgress", "MaxResults": 100}, store=jobs)
    for summary in running["TrainingJobSummaries"]:
        with contextlib.suppress(ConfigError):
            stop_training_job({"TrainingJobName": summary["TrainingJobName"]}, store=jobs)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(_running(record) for record in jobs.query()):
        time.sleep(0.2)


def _running(record: JobRecord) -> bool:
    """Whether a runner process still works on the job (jobs written by a test have none)."""
    return record.runner_pid is not None and not record.runner_done
