"""A rule whose evaluator ended before the rule did is recorded as Error, keeping what it had
checked: the report and DescribeTrainingJob still count its steps and tensors."""

from __future__ import annotations

import time
from pathlib import Path

from trainprobe.jobs.operations.rule_statuses import record_unfinished_rules
from trainprobe.storage.job_layout import JobLayout
from trainprobe.storage.rule_output import RuleOutputWriter, RuleStatus, read_status

KILLED = "the rule process was killed by signal 9 (SIGKILL)"


def test_an_unfinished_rule_ends_in_error_with_its_counts(tmp_path: Path) -> None:
    layout = JobLayout.for_job("job", str(tmp_path))
    directory = layout.rule_output_dir("DeadRelu")
    RuleOutputWriter(directory).write_status(
        RuleStatus(
            "DeadRelu",
            "InProgress",
            "evaluating: 2 step(s) evaluated, 0 tensor(s) checked, 3 step(s) skipped",
            time.time(),
            steps_evaluated=2,
            steps_skipped=3,
            unmatched=("names matching '.*relu_output'",),
        )
    )
    finished = layout.rule_output_dir("ExplodingTensor")
    RuleOutputWriter(finished).write_status(
        RuleStatus("ExplodingTensor", "NoIssuesFound", "found no issue", 1.0, finished=True)
    )
    assert record_unfinished_rules(layout, ["DeadRelu", "ExplodingTensor"], KILLED) == ["DeadRelu"]
    status = read_status(directory)
    assert status is not None
    assert (status.rule_evaluation_status, status.status_details, status.finished) == (
        "Error",
        KILLED,
        True,
    )
    assert (status.steps_evaluated, status.steps_skipped, status.tensors_checked) == (2, 3, 0)
    assert status.unmatched == ("names matching '.*relu_output'",)
    untouched = read_status(finished)
    assert untouched is not None and untouched.rule_evaluation_status == "NoIssuesFound"
