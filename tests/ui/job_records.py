"""A job store record of a job in progress with no runner: what the UI's tests and benchmark put
in a store beside files written by trainprobe's own writers."""

from __future__ import annotations

import time
from pathlib import Path

from trainprobe.jobs import JobRecord


def job_in_progress(name: str, job_dir: Path) -> JobRecord:
    """Job ``name``, Training, its files in ``job_dir``; no runner watches it."""
    now = time.time()
    return JobRecord(
        name=name,
        arn=f"arn:aws:sagemaker:local:000000000000:training-job/{name}",
        request={"TrainingJobName": name},
        job_dir=str(job_dir),
        status="InProgress",
        secondary_status="Training",
        creation_time=now,
        last_modified_time=now,
    )
