"""The job runner writes the profiler report: now and then while a long job trains, and once
more when it has ended, beside ProfilerReport's data."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from job_helpers import request, wait_for

from trainprobe import debugger
from trainprobe.jobs import JobStore, create_training_job

PROFILER_REPORT = debugger.ProfilerRule.sagemaker(
    debugger.rule_configs.ProfilerReport(), name="report-rule"
).to_profiler_rule_config_dict()


def read_report(output: Path) -> dict[str, Any] | None:
    path = output / "reported" / "rule-output" / "report-rule" / "profiler-output"
    try:
        data: dict[str, Any] = json.loads((path / "profiler-report.json").read_text())
    except FileNotFoundError:
        return None
    assert (path / "profiler-report.html").is_file()
    return data


@pytest.mark.slow
def test_the_report_is_refreshed_while_the_job_runs_and_written_at_its_end(
    store: JobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINPROBE_REPORT_EVERY_SECONDS", "1")
    output = tmp_path / "out"
    create_training_job(
        request(
            "reported",
            output,
            *("--steps", "300", "--sleep", "0.02"),  # six seconds or more
            ProfilerConfig={"ProfilingIntervalInMilliseconds": 500, "ProfilingParameters": {}},
            ProfilerRuleConfigurations=[PROFILER_REPORT],
        ),
        store=store,
    )
    deadline = time.monotonic() + 120
    while (live := read_report(output)) is None:
        assert time.monotonic() < deadline, "no report was written while the job ran"
        time.sleep(0.1)
    assert live["Job"]["Status"] == "InProgress"
    assert live["SystemUsage"]["Hosts"], "the live report has no system metrics"

    description = wait_for(store, "reported")
    assert description["TrainingJobStatus"] == "Completed"
    while not (record := store.get("reported")) or not record.runner_done:  # the report is last
        assert time.monotonic() < deadline + 120, "the runner did not finish"
        time.sleep(0.2)
    final = read_report(output)
    assert final is not None
    assert final["Job"]["Status"] == "Ended"
    assert final["Job"]["Steps"] == 300
    assert len(final["Rules"]["Rules"]) == 11
    assert final["Rules"]["Status"] in ("NoIssuesFound", "IssuesFound")
