"""Each job test gets its own trainprobe home and job store; jobs left running are stopped.
``api_server`` serves the job store over HTTP (``trainprobe serve``'s server, in a thread)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainprobe.config.errors import ConfigError
from trainprobe.jobs import JobRecord, JobStore, list_training_jobs, stop_training_job
from trainprobe.jobs.server.api_app import ApiLimits
from trainprobe.jobs.server.api_server import JobApiServer


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


@pytest.fixture
def api_server(store: JobStore, tmp_path: Path) -> Iterator[JobApiServer]:
    """The API server on 127.0.0.1 (a free port), giving each request 2 s to arrive; its key
    pair is the one in the test's trainprobe home."""
    server = JobApiServer(0, store=store, cwd=str(tmp_path), limits=ApiLimits(request_seconds=2))
    server.start()
    yield server
    server.stop()


def _running(record: JobRecord) -> bool:
    """Whether a runner process still works on the job (jobs written by a test have none)."""
    return record.runner_pid is not None and not record.runner_done
