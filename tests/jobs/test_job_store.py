"""The job store: one SQLite file that several processes read and write at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainprobe.jobs import JobNameInUse, JobRecord, JobStore


def record(name: str, created: float = 100.0, status: str = "InProgress") -> JobRecord:
    return JobRecord(
        name=name,
        arn=f"arn:aws:sagemaker:local:000000000000:training-job/{name.lower()}",
        request={"TrainingJobName": name},
        job_dir=f"/jobs/{name}",
        status=status,
        secondary_status="Starting",
        creation_time=created,
        last_modified_time=created,
        transitions=[{"Status": "Starting", "StartTime": created, "StatusMessage": "start"}],
    )


def test_the_store_lives_in_the_trainprobe_home_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINPROBE_HOME", str(tmp_path / "home"))
    assert JobStore().path == str(tmp_path / "home" / "jobs.sqlite")
    assert (tmp_path / "home" / "jobs.sqlite").exists()


def test_a_job_reads_back_as_it_was_written(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    written = record("mnist-1")
    written.profiler_config = {"ProfilingIntervalInMilliseconds": 500}
    store.insert(written)
    assert store.get("mnist-1") == written
    assert store.get("MNIST-1") == written
    assert store.get("mnist-2") is None


def test_job_names_are_unique_whatever_their_case(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    store.insert(record("mnist-1"))
    with pytest.raises(JobNameInUse) as raised:
        store.insert(record("MNIST-1"))
    assert raised.value.field == "TrainingJobName"
    assert raised.value.error_code == "ResourceInUse"


def test_a_transition_is_recorded_and_closes_the_previous_one(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    store.insert(record("job"))
    assert store.transition("job", "InProgress", "Training", "training", now=110.0)
    assert store.transition("job", "Completed", "Completed", "done", now=150.0)
    job = store.get("job")
    assert job is not None
    assert (job.status, job.secondary_status, job.last_modified_time) == (
        "Completed",
        "Completed",
        150.0,
    )
    assert job.transitions == [
        {"Status": "Starting", "StartTime": 100.0, "EndTime": 110.0, "StatusMessage": "start"},
        {"Status": "Training", "StartTime": 110.0, "EndTime": 150.0, "StatusMessage": "training"},
        {"Status": "Completed", "StartTime": 150.0, "EndTime": 150.0, "StatusMessage": "done"},
    ]
    # A finished job does not move again when the move asks for a job in progress.
    assert not store.transition("job", "Failed", "Failed", "late", only_if_status=["InProgress"])
    assert store.get("job").status == "Completed"  # type: ignore[union-attr]


WRITER = """
import sys
from trainprobe.jobs import JobStore
store = JobStore(sys.argv[1])
worker = sys.argv[2]
for count in range(40):
    store.transition("shared", "InProgress", f"{worker}-{count}", "step")
    store.heartbeat("shared")
"""


def test_several_processes_write_one_job_without_losing_a_change(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    store = JobStore(path)
    store.insert(record("shared"))
    writers = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(path), f"w{index}"])
        for index in range(4)
    ]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0, 0, 0]
    job = store.get("shared")
    assert job is not None
    # Each transition read the list and appended to it: none was lost to another process.
    statuses = [item["Status"] for item in job.transitions]
    assert len(statuses) == 1 + 4 * 40
    for index in range(4):
        mine = [status for status in statuses if status.startswith(f"w{index}-")]
        assert mine == [f"w{index}-{count}" for count in range(40)]
