"""A job with LossSpike and GradientNormSpike: its training is told which rules to judge inside
its steps (the hook configuration file's ``TrainingRules``), and their evaluators, which cannot
skip a step themselves, run beside it without refusing the in-training actions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from job_helpers import request, rule, rule_statuses, wait_for

from trainprobe.capture.hook_config_file import parse_hook_config
from trainprobe.config.actions import parse_actions
from trainprobe.debugger import Rule, rule_configs
from trainprobe.estimator import Estimator
from trainprobe.jobs import JobStore, create_training_job
from trainprobe.jobs.operations.describe import layout_at
from trainprobe.report import build_report

pytestmark = pytest.mark.slow

DEFAULTS = {
    "window": "128",
    "sigma": "6.0",
    "warmup_steps": "20",
    "ratio": "0.0",
    "max_skips": "10",
    "max_skips_window": "100",
}


def test_the_training_is_told_its_in_training_rules(store: JobStore, tmp_path: Path) -> None:
    output = tmp_path / "out"
    rollback = json.dumps({"name": "Rollback", "steps": "5", "lr_factor": "0.5"})
    create_training_job(
        request(
            "spikes",
            output,
            "--steps",
            "30",
            DebugRuleConfigurations=[
                rule("LossSpike", sigma="5", action_json=json.dumps({"name": "SkipStep"})),
                rule("GradientNormSpike", action_json=rollback),
                rule("ExplodingTensor"),
            ],
        ),
        store=store,
    )
    described = wait_for(store, "spikes")

    assert described["TrainingJobStatus"] == "Completed"
    document = json.loads(Path(layout_at(str(output / "spikes")).hook_config_file).read_text())
    assert document["TrainingRules"] == [
        {
            "RuleConfigurationName": "LossSpike",
            "RuleName": "LossSpike",
            "RuleParameters": {**DEFAULTS, "sigma": "5.0", "action_json": '[{"name": "SkipStep"}]'},
        },
        {
            "RuleConfigurationName": "GradientNormSpike",
            "RuleName": "GradientNormSpike",
            "RuleParameters": {
                **DEFAULTS,
                "action_json": '[{"name": "Rollback", "steps": "5", "lr_factor": "0.5"}]',
            },
        },
    ]
    action_json = document["TrainingRules"][1]["RuleParameters"]["action_json"]
    assert parse_actions(action_json) == rule_configs.ActionList(
        rule_configs.Rollback(steps=5, lr_factor=0.5)
    )
    # The hook's own reader takes the file as it is (the member is trainprobe's).
    assert parse_hook_config(document).out_dir == str(output / "spikes" / "debug-output")
    # The evaluators ran to a verdict: no SkipStep or Rollback was theirs to carry out.
    details = {
        status["RuleConfigurationName"]: status["StatusDetails"]
        for status in described["DebugRuleEvaluationStatuses"]
    }
    statuses = rule_statuses(described)
    assert statuses["ExplodingTensor"] == "NoIssuesFound"
    assert statuses["LossSpike"] in ("NoIssuesFound", "IssuesFound"), details
    # Where the hook judged it, a verdict; where not, an Error that says why, not a failure.
    assert statuses["GradientNormSpike"] == "NoIssuesFound" or (
        "is judged inside the training" in details["GradientNormSpike"]
    ), details


def test_a_job_without_them_keeps_sagemaker_s_file(store: JobStore, tmp_path: Path) -> None:
    output = tmp_path / "out"
    create_training_job(
        request("plain", output, "--steps", "3", DebugRuleConfigurations=[rule("ExplodingTensor")]),
        store=store,
    )
    wait_for(store, "plain")
    document = json.loads(Path(layout_at(str(output / "plain")).hook_config_file).read_text())
    assert "TrainingRules" not in document


def test_a_diverged_training_skips_its_updates_then_stops(store: JobStore, tmp_path: Path) -> None:
    """The weights turn NaN before step 25: every loss from there is a spike. The hook skips
    those updates, and, past max_skips, stops the training; the rule's status and the job's
    report say so, spike by spike."""
    output = tmp_path / "out"
    skip = json.dumps({"name": "SkipStep"})
    create_training_job(
        request(
            "diverged",
            output,
            "--steps", "60", "--nan-at", "25",
            DebugRuleConfigurations=[
                rule("LossSpike", warmup_steps="5", max_skips="3", action_json=skip)
            ],
        ),
        store=store,
    )  # fmt: skip
    described = wait_for(store, "diverged")

    assert described["TrainingJobStatus"] == "Stopped", described.get("FailureReason")
    [status] = described["DebugRuleEvaluationStatuses"]
    assert status["RuleEvaluationStatus"] == "IssuesFound", status
    assert "TRAIN step 25: nan (not finite); the update was skipped" in (status["StatusDetails"])
    report = build_report(str(output / "diverged"))
    spikes = json.loads(Path(report.json).read_text())["DebuggingRules"]["Spikes"]
    # Three skips, then the fourth spike stops the training before its update.
    assert [(spike["Step"], spike["Action"]) for spike in spikes] == [
        (25, "skip"),
        (26, "skip"),
        (27, "skip"),
        (28, "stop"),
    ]
    assert spikes[-1]["Text"].endswith("the training was stopped before the update")


def test_the_estimator_runs_a_rollback_without_code_changes(
    store: JobStore, tmp_path: Path
) -> None:
    """The SDK's way: Rule.sagemaker with Rollback on the estimator; the unchanged script's
    diverging weights are rolled back, then, past max_skips, the training is stopped."""
    estimator = Estimator(
        "plain_training.py",
        source_dir=str(Path(__file__).parent),
        hyperparameters={"steps": 60, "nan-at": 25},
        rules=[
            Rule.sagemaker(
                rule_configs.loss_spike(),
                rule_parameters={"warmup_steps": "5", "max_skips": "2"},
                actions=rule_configs.Rollback(steps=5, lr_factor=0.5),
            )
        ],
        output_path=str(tmp_path / "out"),
        base_job_name="rollback",
        store=store,
    )
    estimator.fit(wait=False)
    job = estimator.latest_training_job
    assert job is not None
    wait_for(store, job.name)
    summary = estimator.rule_job_summary()
    assert summary[0]["RuleEvaluationStatus"] == "IssuesFound", summary
    assert "the model and optimizer were rolled back" in summary[0]["StatusDetails"]
    document = json.loads(
        Path(layout_at(str(tmp_path / "out" / job.name)).hook_config_file).read_text()
    )
    [entry] = document["TrainingRules"]
    assert entry["RuleParameters"]["max_skips"] == "2"
