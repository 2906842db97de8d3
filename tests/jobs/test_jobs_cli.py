"""``trainprobe jobs ...`` and ``trainprobe logs``, run as the user runs them (subprocesses)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from job_helpers import request, rule, trainprobe, wait_for

from trainprobe.jobs import JobStore

pytestmark = pytest.mark.slow


def output_json(finished: subprocess.CompletedProcess[str]) -> Any:
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout)


def test_create_describe_list_and_logs_from_the_command_line(
    store: JobStore, tmp_path: Path
) -> None:
    job = request(
        "from-json",
        tmp_path / "out",
        "--steps",
        "5",
        DebugRuleConfigurations=[rule("ExplodingTensor")],
    )
    (tmp_path / "job.json").write_text(json.dumps(job))
    created = output_json(
        trainprobe(tmp_path, "jobs", "create", "--cli-input-json", "file://job.json")
    )
    assert created == {
        "TrainingJobArn": "arn:aws:sagemaker:local:000000000000:training-job/from-json"
    }
    wait_for(store, "from-json")

    described = output_json(trainprobe(tmp_path, "jobs", "describe", "from-json"))
    assert described["TrainingJobStatus"] == "Completed"
    assert described["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "NoIssuesFound"
    assert described["CreationTime"].endswith("+00:00")  # ISO 8601, as the AWS CLI shows times
    same = output_json(trainprobe(tmp_path, "jobs", "describe", "--training-job-name", "from-json"))
    assert same["TrainingJobArn"] == described["TrainingJobArn"]

    listed = output_json(
        trainprobe(tmp_path, "jobs", "list", "--status-equals", "Completed", "--json")
    )
    assert [item["TrainingJobName"] for item in listed["TrainingJobSummaries"]] == ["from-json"]
    table = trainprobe(tmp_path, "jobs", "list").stdout.splitlines()
    assert ["Name", "Status", "Secondary", "Created", "Ended"] in [line.split() for line in table]
    [row] = [line.split() for line in table if "from-json" in line]
    assert row[:3] == ["from-json", "Completed", "Completed"]

    logs = trainprobe(tmp_path, "logs", "from-json")
    assert logs.returncode == 0
    assert "arguments: ['--steps', '5']" in logs.stdout and "finished" in logs.stdout
    rule_log = trainprobe(tmp_path, "logs", "from-json", "--rule", "ExplodingTensor")
    assert "ExplodingTensor: NoIssuesFound" in rule_log.stdout
    followed = trainprobe(tmp_path, "logs", "from-json", "--follow")
    assert followed.returncode == 0 and "finished" in followed.stdout

    stopped = trainprobe(tmp_path, "jobs", "stop", "from-json")
    assert stopped.returncode == 2
    assert "refused because the job is Completed" in stopped.stderr


def test_an_unknown_job_and_a_bad_request_are_refused(store: JobStore, tmp_path: Path) -> None:
    unknown = trainprobe(tmp_path, "jobs", "describe", "nothing-here")
    assert unknown.returncode == 2
    assert "TrainingJobName: 'nothing-here' is not valid" in unknown.stderr
    (tmp_path / "bad.json").write_text(
        json.dumps({"TrainingJobName": "bad", "Hyperparameters": {}})
    )
    bad = trainprobe(tmp_path, "jobs", "create", "--cli-input-json", "file://bad.json")
    assert bad.returncode == 2
    assert "Did you mean 'HyperParameters'?" in bad.stderr
    assert store.names() == []
