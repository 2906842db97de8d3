"""The flight recorder of a job: `trainprobe profile JOB --steps 2`, UpdateTrainingJob's
ProfileNextSteps and a rule's ProfileNextSteps action capture the next steps of the running
training; asking a job that does not profile its framework is refused, naming why. A training
that stops advancing is told where it is stuck before StalledTrainingRule stops it, each rank of
a DDP training (one dawdling, the other waiting for it in an all_reduce) apart."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from job_helpers import request, rule, trainprobe, wait_for

from trainprobe.config.errors import ConfigError
from trainprobe.debugger import rule_configs
from trainprobe.jobs import (
    JobStateError,
    JobStore,
    create_training_job,
    profile_training_job,
    update_training_job,
)
from trainprobe.storage.flight_captures import Capture, list_captures
from trainprobe.storage.trace_file import latest_timeline_step
from trainprobe.storage.training_stacks import read_stacks

STOP_TRAINING = json.dumps({"name": "StopTraining"})
PROFILED = {"ProfilingIntervalInMilliseconds": 500, "ProfilingParameters": {}}


def wait_for_capture(
    profiler_output: Path, trigger: str, count: int = 1, timeout: float = 60.0
) -> list[Capture]:
    """The captures of ``trigger``, once there are ``count`` with their traces written. (On a
    busy machine, a step of this training may also be slow enough for a slow-step capture.)"""
    deadline = time.monotonic() + timeout
    while True:
        found = [c for c in list_captures(str(profiler_output)) if c.trigger == trigger]
        if len(found) >= count and all(capture.trace for capture in found):
            return found
        assert time.monotonic() < deadline, f"no {trigger} capture appeared in {profiler_output}"
        time.sleep(0.2)


def wait_for_steps(profiler_output: Path, steps: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while (latest_timeline_step(str(profiler_output)) or 0) < steps:
        assert time.monotonic() < deadline, "the training did not get going"
        time.sleep(0.2)


def run_until_stalled(
    store: JobStore, output: Path, name: str, script: str, **members: Any
) -> dict[str, Any]:
    """Run ``script`` (here) as a profiled job watched by StalledTrainingRule (4 s) with a
    StopTraining action; its description once it has ended."""
    create_training_job(
        request(
            name,
            output,
            *("--steps", "20"),
            script=Path(__file__).parent / script,
            ProfilerConfig=PROFILED,
            DebugRuleConfigurations=[
                rule("StalledTrainingRule", threshold="4", action_json=STOP_TRAINING)
            ],
            **members,
        ),
        store=store,
    )
    return wait_for(store, name)


@pytest.mark.slow
def test_trainprobe_profile_captures_the_next_steps_of_a_running_job(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    create_training_job(
        request("flighty", output, "--steps", "1500", "--sleep", "0.01", ProfilerConfig=PROFILED),
        store=store,
    )
    profiler_output = output / "flighty" / "profiler-output"
    wait_for_steps(profiler_output, 30)

    done = trainprobe(tmp_path, "profile", "flighty", "--steps", "2")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ProfileRequest"]["steps"] == 2
    [capture] = wait_for_capture(profiler_output, "request")
    assert capture.trigger == "request"
    assert capture.reason == "trainprobe profile asked for 2 step(s)"
    assert len(capture.steps) == 2
    first = capture.steps[0].step
    assert first >= 30
    assert capture.folder.endswith(f"/request-step{first:09d}")
    assert capture.trace is not None
    assert (profiler_output / capture.folder / capture.trace).stat().st_size > 0

    # The same through UpdateTrainingJob, with trainprobe's ProfilingParameters key.
    update_training_job(
        {
            "TrainingJobName": "flighty",
            "ProfilerConfig": {"ProfilingParameters": {"ProfileNextSteps": "3"}},
        },
        store=store,
    )
    second = wait_for_capture(profiler_output, "request", 2)[1]
    assert len(second.steps) == 3 and second.steps[0].step > first

    done = trainprobe(tmp_path, "profile", "flighty", "--steps", "0")
    assert done.returncode == 2
    assert "Steps" in done.stderr and "from 1 to 20" in done.stderr
    trainprobe(tmp_path, "jobs", "stop", "flighty")
    wait_for(store, "flighty")


@pytest.mark.slow
def test_a_job_that_does_not_profile_its_framework_refuses_a_profile_request(
    store: JobStore, tmp_path: Path
) -> None:
    create_training_job(
        request("unprofiled", tmp_path / "out", "--steps", "1500", "--sleep", "0.01"),
        store=store,
    )
    with pytest.raises(JobStateError, match="profiles its framework"):
        profile_training_job({"TrainingJobName": "unprofiled", "Steps": 2}, store=store)


@pytest.mark.slow
def test_a_rules_profile_next_steps_action_captures_the_steps_after_it_fired(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    action = rule_configs.ProfileNextSteps(steps=2).serialize()
    create_training_job(
        request(
            "exploding",
            output,
            *("--steps", "1500", "--sleep", "0.01", "--nan-at", "8"),
            ProfilerConfig=PROFILED,
            DebugRuleConfigurations=[rule("ExplodingTensor", action_json=action)],
        ),
        store=store,
    )
    profiler_output = output / "exploding" / "profiler-output"
    capture = wait_for_capture(profiler_output, "rule")[0]
    assert capture.trigger == "rule"
    assert capture.reason == "rule ExplodingTensor asked for 2 step(s)"
    assert len(capture.steps) == 2 and capture.steps[0].step > 8
    actions = output / "exploding" / "rule-output" / "ExplodingTensor" / "actions.jsonl"
    assert '"action":"profilenextsteps"' in actions.read_text()
    trainprobe(tmp_path, "jobs", "stop", "exploding")
    wait_for(store, "exploding")


@pytest.mark.slow
def test_a_stalled_training_is_told_where_it_is_stuck_then_stopped(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    described = run_until_stalled(store, output, "stuck", "hanging_training.py")

    assert described["TrainingJobStatus"] == "Stopped"
    [status] = described["DebugRuleEvaluationStatuses"]
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    details = status["StatusDetails"]
    assert "the training looks stalled" in details
    where = "the main thread waits in wait_for_a_batch_that_never_comes (hanging_training.py:13)"
    assert where in details, details
    [stacks] = read_stacks(str(output / "stuck" / "profiler-output"))
    assert stacks.reason == "a rule found that the training makes no progress"


@pytest.mark.parametrize("value", ["0", "lots", "21", ""])
def test_a_bad_profile_next_steps_names_its_field_before_anything_changes(
    store: JobStore, value: str
) -> None:
    update = {
        "TrainingJobName": "any-job",
        "ProfilerConfig": {"ProfilingParameters": {"ProfileNextSteps": value}},
    }
    with pytest.raises(ConfigError) as caught:
        update_training_job(update, store=store)
    assert caught.value.field == "ProfilerConfig.ProfilingParameters.ProfileNextSteps"
    assert "from 1 to 20" in str(caught.value)


@pytest.mark.slow
def test_in_a_ddp_training_each_rank_is_told_where_it_waits(
    store: JobStore, tmp_path: Path
) -> None:
    two_hosts = {"InstanceCount": 2, "InstanceType": "ml.m5.xlarge"}
    described = run_until_stalled(
        store, tmp_path / "out", "ddp-stuck", "ddp_hanging_training.py", ResourceConfig=two_hosts
    )

    assert described["TrainingJobStatus"] == "Stopped"
    details = described["DebugRuleEvaluationStatuses"][0]["StatusDetails"]
    assert "waits in all_reduce (" in details, details
    assert "called from sum_the_losses at ddp_hanging_training.py:21" in details
    assert "the main thread waits in dawdle (ddp_hanging_training.py:17)" in details
