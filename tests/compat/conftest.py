"""The compat tests import the job tests' helpers; each gets its own trainprobe home."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "jobs"))

from trainprobe import smdebug_names
from trainprobe.jobs import JobStore, list_training_jobs, stop_training_job


@pytest.fixture
def smdebug_names_on() -> Iterator[None]:
    """``import smdebug`` answered by trainprobe for the test, and forgotten after it."""
    assert smdebug_names.install(by="a test")
    try:
        yield
    finally:
        smdebug_names.uninstall()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobStore]:
    """A job store of the test's own; the jobs it left running are stopped."""
    monkeypatch.setenv("TRAINPROBE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINPROBE_STOP_GRACE_SECONDS", "5")
    jobs = JobStore(tmp_path / "home" / "jobs.sqlite")
    yield jobs
    running = list_training_jobs({"StatusEquals": "InProgress", "MaxResults": 100}, store=jobs)
    for summary in running["TrainingJobSummaries"]:
        stop_training_job({"TrainingJobName": summary["TrainingJobName"]}, store=jobs)
