"""A job whose tensors fill their disk: the training completes, what was saved reads back, and
the job's description, its rules' statuses and its report say where and why saving stopped.

The tensors go to a small tmpfs, mounted for the test (it needs root; it is skipped, saying why,
where mounting is not permitted); everything else of the job stays on the test's disk.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from job_helpers import request, rule, wait_for

from trainprobe.cli.job_follower import saving_stopped
from trainprobe.jobs import JobStore, create_training_job
from trainprobe.report.overhead import debugger_overhead
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

LOSS = "CrossEntropyLoss_output_0"
NO_SPACE = "No space left on device"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, unmounted after the test."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip() or 'not root'}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_is_said_in_the_job_and_what_was_saved_reads_back(
    store: JobStore, tmp_path: Path, small_disk: Path
) -> None:
    create_training_job(
        request(
            "disk-full",
            tmp_path / "out",
            "--steps",
            "200",
            DebugHookConfig={
                "S3OutputPath": str(small_disk),
                "HookParameters": {"save_interval": "1"},
            },
            DebugRuleConfigurations=[rule("LossNotDecreasing")],
        ),
        store=store,
    )
    described = wait_for(store, "disk-full")

    # The training went on to its end.
    assert described["TrainingJobStatus"] == "Completed"
    log = (tmp_path / "out" / "disk-full" / "logs" / "training.log").read_text()
    assert "finished" in log
    # Every step saved before the disk filled reads back, in order, up to the step that failed.
    debug_output = small_disk / "disk-full" / "debug-output"
    steps = create_trial(str(debug_output)).tensor(LOSS).steps()
    assert steps and steps == list(range(len(steps))) and len(steps) < 200
    trial = create_trial(str(debug_output))
    assert all(trial.tensor(LOSS).value(step).size == 1 for step in steps)
    # The description says where and why saving stopped.
    said = f"Debugger stopped saving at step {len(steps)}: {NO_SPACE}"
    final = described["SecondaryStatusTransitions"][-1]
    assert final["Status"] == "Completed"
    assert final["StatusMessage"] == f"Training job completed. {said}"
    assert saving_stopped(described) == said  # what the live view shows
    # The rule says up to which step it had data.
    status = described["DebugRuleEvaluationStatuses"][0]
    assert status["StatusDetails"].endswith(
        f"(the rule had data up to TRAIN step {steps[-1]}: {said})"
    )
    # The report says it too.
    assert debugger_overhead(str(debug_output), None).saving_stopped == said
