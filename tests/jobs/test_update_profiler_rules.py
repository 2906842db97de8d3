"""Profiler rules added by UpdateTrainingJob: they start on the running job and judge all of it.

The first test runs a real job (``plain_training.py``, hooked and profiled by the job runner),
adds a rule while it trains, and checks what a user would look at: DescribeTrainingJob's
ProfilerRuleEvaluationStatuses and the rule's output under ``rule-output/<name>/``. The others
check the updates that are refused, on jobs written straight into the job store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from job_helpers import request, rule, rule_statuses, wait_for

from timing import wait_until
from trainprobe import debugger
from trainprobe.config.errors import ConfigErrors
from trainprobe.jobs import (
    JobRecord,
    JobStateError,
    JobStore,
    create_training_job,
    describe_training_job,
    stop_training_job,
    update_training_job,
)
from trainprobe.jobs.operations.progress import latest_saved_step
from trainprobe.storage.rule_output import read_evaluations, read_status

PROFILER_STATUSES = "ProfilerRuleEvaluationStatuses"

# Framework profiling records every step's duration, which StepOutlier reads.
PROFILER_CONFIG = debugger.ProfilerConfig(
    system_monitor_interval_millis=500, framework_profile_params=debugger.FrameworkProfile()
).to_request_dict()

# A step more than 0.01 standard deviations above the mean is an outlier, and two outliers
# are an issue: among 150 real training steps there are always more than two.
STEP_OUTLIERS = debugger.ProfilerRule.sagemaker(
    debugger.rule_configs.StepOutlier(stddev=0.01, n_outliers=1), name="step-outliers"
).to_profiler_rule_config_dict()


def profiler_rule(name: str, rule_to_invoke: str = "OverallSystemUsage") -> dict[str, Any]:
    """A ProfilerRuleConfigurations entry for built-in profiler rule ``rule_to_invoke``."""
    return {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
        "RuleParameters": {"rule_to_invoke": rule_to_invoke},
    }


def saved_steps(debug_output: Path) -> int:
    latest = latest_saved_step(str(debug_output))
    return 0 if latest is None else latest + 1


@pytest.mark.slow
def test_a_profiler_rule_added_to_a_running_job_judges_the_whole_job(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    summary = profiler_rule("OverallSystemUsage")
    # Unstopped, this training would run for more than half an hour.
    create_training_job(
        request(
            "profiled",
            output,
            "--steps",
            "100000",
            "--sleep",
            "0.02",
            ProfilerConfig=PROFILER_CONFIG,
            ProfilerRuleConfigurations=[summary],
        ),
        store=store,
    )
    directory = output / "profiled"
    debug_output = directory / "debug-output"
    wait_until(lambda: saved_steps(debug_output) >= 20, "20 saved steps")
    steps_before_the_update = saved_steps(debug_output)

    response = update_training_job(
        {"TrainingJobName": "profiled", "ProfilerRuleConfigurations": [STEP_OUTLIERS]},
        store=store,
    )
    assert response == {
        "TrainingJobArn": "arn:aws:sagemaker:local:000000000000:training-job/profiled"
    }
    described = describe_training_job({"TrainingJobName": "profiled"}, store=store)
    assert described["TrainingJobStatus"] == "InProgress"
    assert described["ProfilerRuleConfigurations"] == [summary, STEP_OUTLIERS]
    assert rule_statuses(described, PROFILER_STATUSES) == {
        "OverallSystemUsage": "InProgress",
        "step-outliers": "InProgress",
    }
    # Its evaluator starts while the training runs, and says so in the rule's own output.
    rule_output = directory / "rule-output" / "step-outliers"
    wait_until(lambda: read_status(str(rule_output)) is not None, "the added rule to start")
    described = describe_training_job({"TrainingJobName": "profiled"}, store=store)
    assert described["TrainingJobStatus"] == "InProgress"

    # StepOutlier judges a kind of step once it has seen more than 100 of them.
    wait_until(lambda: saved_steps(debug_output) >= 150, "150 saved steps")
    stop_training_job({"TrainingJobName": "profiled"}, store=store)
    described = wait_for(store, "profiled")

    assert described["TrainingJobStatus"] == "Stopped"
    assert rule_statuses(described, PROFILER_STATUSES) == {
        "OverallSystemUsage": "NoIssuesFound",
        "step-outliers": "IssuesFound",
    }
    status = read_status(str(rule_output))
    assert status is not None and status.finished
    assert status.rule_evaluation_status == "IssuesFound"
    assert read_evaluations(str(rule_output)), "the added rule evaluated no window"
    report = json.loads(
        (rule_output / "profiler-output" / "profiler-reports" / "StepOutlier.json").read_text()
    )
    # It read the job from its beginning: the steps timed before it was added count too.
    [kind] = report["Details"]["steps"].values()
    assert kind["step_stats_s"]["count"] > steps_before_the_update
    assert kind["outliers"] > 1
    assert (directory / "logs" / "rules" / "profiler-rules-added-1.log").exists()
    # Stopped by SIGTERM, the training closed its files first: no half-written timeline is left.
    assert not list((directory / "profiler-output").rglob("*.tmp"))
    assert "the training was stopped (SIGTERM)" in (directory / "logs" / "training.log").read_text()


def stored(
    store: JobStore, tmp_path: Path, name: str, status: str = "InProgress", **values: Any
) -> JobRecord:
    """A job as its runner would have left it in the store (with no runner behind it)."""
    values.setdefault("request", {"TrainingJobName": name})
    job = JobRecord(
        name=name,
        arn=f"arn:aws:sagemaker:local:000000000000:training-job/{name}",
        job_dir=str(tmp_path / "out" / name),
        status=status,
        secondary_status="Training" if status == "InProgress" else status,
        creation_time=100.0,
        last_modified_time=101.0,
        training_start_time=100.0,
        runner_done=status not in ("InProgress", "Stopping"),
        **values,
    )
    store.insert(job)
    return job


def test_a_job_holds_at_most_twenty_profiler_rules(store: JobStore, tmp_path: Path) -> None:
    nineteen = [profiler_rule(f"summary-{index}") for index in range(19)]
    stored(store, tmp_path, "crowded", profiler_rules=nineteen)
    two_more = [profiler_rule("summary-19"), profiler_rule("summary-20")]

    with pytest.raises(ConfigErrors) as raised:
        update_training_job(
            {"TrainingJobName": "crowded", "ProfilerRuleConfigurations": two_more}, store=store
        )
    [problem] = raised.value.problems()
    assert problem.field == "ProfilerRuleConfigurations"
    assert problem.value == "2 more rules (the job has 19)"
    assert "at most 20 profiler rules" in problem.allowed
    record = store.get("crowded")
    assert record is not None and record.profiler_rules == nineteen

    update_training_job(
        {"TrainingJobName": "crowded", "ProfilerRuleConfigurations": two_more[:1]}, store=store
    )
    described = describe_training_job({"TrainingJobName": "crowded"}, store=store)
    assert len(described[PROFILER_STATUSES]) == 20
    assert described[PROFILER_STATUSES][-1]["RuleEvaluationStatus"] == "InProgress"


def test_a_rule_name_the_job_already_has_is_refused(store: JobStore, tmp_path: Path) -> None:
    stored(
        store,
        tmp_path,
        "named",
        request={"TrainingJobName": "named", "DebugRuleConfigurations": [rule("ExplodingTensor")]},
        profiler_rules=[profiler_rule("summary")],
    )
    for index, name in enumerate(["summary", "ExplodingTensor"]):
        fresh = profiler_rule("fresh")
        entries = [fresh, profiler_rule(name, "StepOutlier")] if index else [profiler_rule(name)]
        with pytest.raises(ConfigErrors) as raised:
            update_training_job(
                {"TrainingJobName": "named", "ProfilerRuleConfigurations": entries}, store=store
            )
        [problem] = raised.value.problems()
        assert problem.field == f"ProfilerRuleConfigurations[{index}].RuleConfigurationName"
        assert problem.value == name
        assert "a name no other rule of the job has" in problem.allowed
    record = store.get("named")
    assert record is not None
    assert [entry["RuleConfigurationName"] for entry in record.profiler_rules] == ["summary"]


@pytest.mark.parametrize("status", ["Completed", "Failed", "Stopped", "Stopping"])
def test_a_job_not_in_progress_cannot_be_updated(
    store: JobStore, tmp_path: Path, status: str
) -> None:
    stored(store, tmp_path, "over", status)
    with pytest.raises(JobStateError) as raised:
        update_training_job(
            {"TrainingJobName": "over", "ProfilerRuleConfigurations": [STEP_OUTLIERS]},
            store=store,
        )
    assert raised.value.error_code == "ValidationException"
    assert raised.value.field == "TrainingJobName"
    assert raised.value.value == "over"
    assert f"UpdateTrainingJob was refused because the job is {status}" in raised.value.allowed
    record = store.get("over")
    assert record is not None and record.profiler_rules == []
    described = describe_training_job({"TrainingJobName": "over"}, store=store)
    assert PROFILER_STATUSES not in described
