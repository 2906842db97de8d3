"""A job's runner is told apart from a later process of its id by what cannot drift.

Its wall-clock start (the boot time plus its start in clock ticks) moves with the boot time, which
Linux gives in whole seconds and which follows a stepped clock: a live runner is never declared
gone for that. The only fake is at that boundary: psutil's boot time, or a machine without
``/proc``.
"""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from job_helpers import request, rule, wait_for

from trainprobe.jobs import (
    JobRecord,
    JobStore,
    create_training_job,
    describe_training_job,
)
from trainprobe.jobs.runner import liveness
from trainprobe.jobs.runner.liveness import process_identity, process_start_time

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="psutil's boot time on Linux")

SLEEPER = "import time; time.sleep(120)"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that says it runs the job ``live`` (``--job live``), as a runner does."""
    process = subprocess.Popen([sys.executable, "-c", SLEEPER, "--job", "live"])
    yield process
    process.kill()
    process.wait()


def move_boot_time(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """What a boot time read in whole seconds, or a clock stepped by NTP, does to every
    process's wall-clock start (``create_time`` is the boot time plus the start ticks)."""
    from psutil import _pslinux

    real = _pslinux.boot_time
    monkeypatch.setattr(_pslinux, "boot_time", lambda: real() + seconds)


def job_run_by(store: JobStore, tmp_path: Path, pid: int, identity: str | None) -> None:
    """Record the job ``live``, InProgress, as run by process ``pid`` on this host."""
    now = time.time()
    store.insert(
        JobRecord(
            name="live",
            arn="arn:aws:sagemaker:local:000000000000:training-job/live",
            request={"TrainingJobName": "live"},
            job_dir=str(tmp_path / "out" / "live"),
            status="InProgress",
            secondary_status="Training",
            creation_time=now,
            last_modified_time=now,
            runner_pid=pid,
            runner_host=socket.gethostname(),
            runner_started=process_start_time(pid),
            runner_identity=identity,
            heartbeat_time=now,
        )
    )


def status(store: JobStore) -> tuple[str, str]:
    described = describe_training_job({"TrainingJobName": "live"}, store=store)
    return described["TrainingJobStatus"], described.get("FailureReason", "")


@pytest.mark.slow
@pytest.mark.parametrize("seconds", [1.0, -1.0, 3600.0])
def test_a_running_job_stays_in_progress_when_the_boot_time_moves(
    seconds: float, store: JobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_training_job(
        request(
            "moved",
            tmp_path / "out",
            "--steps",
            "100000",
            "--sleep",
            "0.05",
            DebugRuleConfigurations=[rule("LossNotDecreasing")],
        ),
        store=store,
    )
    wait_for(store, "moved", lambda d: d["SecondaryStatus"] == "Training", "the training")
    move_boot_time(monkeypatch, seconds)
    for _ in range(3):
        described = describe_training_job({"TrainingJobName": "moved"}, store=store)
        assert described["TrainingJobStatus"] == "InProgress", described.get("FailureReason")
        time.sleep(0.5)


def test_a_live_runner_is_alive_whatever_the_boot_time(
    sleeper: subprocess.Popen[bytes],
    store: JobStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job_run_by(store, tmp_path, sleeper.pid, process_identity(sleeper.pid))
    move_boot_time(monkeypatch, 1.0)
    assert status(store) == ("InProgress", "")


def test_a_process_that_took_the_runners_id_is_not_the_runner(
    sleeper: subprocess.Popen[bytes], store: JobStore, tmp_path: Path
) -> None:
    # The id now names another process than the one recorded (here, this test's own start).
    job_run_by(store, tmp_path, sleeper.pid, process_identity(psutil.Process().pid))
    job, reason = status(store)
    assert job == "Failed"
    assert f"the job runner (process {sleeper.pid} on" in reason
    assert "ended before the job did" in reason


def test_without_proc_the_runner_is_known_by_its_job_on_its_command_line(
    store: JobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(liveness, "_PROC", str(tmp_path / "no-proc"))
    move_boot_time(monkeypatch, 1.0)
    runner = subprocess.Popen([sys.executable, "-c", SLEEPER, "--job", "LIVE"])
    stranger = subprocess.Popen([sys.executable, "-c", SLEEPER, "--job", "other"])
    try:
        assert process_identity(runner.pid) is None
        job_run_by(store, tmp_path, runner.pid, None)
        assert status(store) == ("InProgress", "")  # job names compare without case
        store.update("live", runner_pid=stranger.pid, touch=False)
        assert status(store)[0] == "Failed"
    finally:
        for process in (runner, stranger):
            process.kill()
            process.wait()


def test_a_store_made_before_the_runner_identity_opens_with_it(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE training_jobs (name TEXT PRIMARY KEY COLLATE NOCASE, arn TEXT NOT NULL,"
            " request TEXT NOT NULL, job_dir TEXT NOT NULL, status TEXT NOT NULL,"
            " secondary_status TEXT NOT NULL, transitions TEXT NOT NULL, failure_reason TEXT,"
            " creation_time REAL NOT NULL, training_start_time REAL, training_end_time REAL,"
            " last_modified_time REAL NOT NULL, profiler_config TEXT,"
            " profiler_rules TEXT NOT NULL, stop_reason TEXT, runner_pid INTEGER,"
            " runner_host TEXT, runner_started REAL, heartbeat_time REAL,"
            " runner_done INTEGER NOT NULL DEFAULT 0)"
        )
        connection.execute(
            "INSERT INTO training_jobs VALUES ('old', 'arn', '{}', '/', 'Completed', 'Completed',"
            " '[]', NULL, 1.0, NULL, NULL, 2.0, NULL, '[]', NULL, NULL, NULL, NULL, NULL, 1)"
        )
    store = JobStore(path)
    old = store.get("old")
    assert old is not None and old.status == "Completed" and old.runner_identity is None
    store.update("old", runner_identity="boot:1", touch=False)
    updated = store.get("old")
    assert updated is not None and updated.runner_identity == "boot:1"
