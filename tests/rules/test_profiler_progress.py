"""A profiler rule's status while the job runs says how far it got: the windows it evaluated,
and when the next comes (a window is judged once its data are complete)."""

from __future__ import annotations

from pathlib import Path

from test_profiler_data import definition, end_job, follow, host, write_system

from timing import wait_until
from trainprobe.rules.verdict import IN_PROGRESS, NO_ISSUES_FOUND
from trainprobe.storage.rule_output import read_status


def details_of(job: Path, rule: str) -> str:
    status = read_status(str(job / "rule-output" / rule))
    return "" if status is None else f"{status.rule_evaluation_status}: {status.status_details}"


def test_while_the_job_runs_a_profiler_rule_counts_the_windows_it_evaluated(
    tmp_path: Path,
) -> None:
    out = tmp_path / "profiler-output"
    write_system(out, [host() for _ in range(35)])  # 3.5 s of readings, every 100 ms
    rule = definition("OverallSystemUsage", scan_interval_us=1_000_000)
    following = follow([rule], tmp_path, framework_profiling=False)
    wait_until(
        lambda: "3 window(s) evaluated" in details_of(tmp_path, "OverallSystemUsage"),
        lambda: f"three windows evaluated: {details_of(tmp_path, 'OverallSystemUsage')}",
        timeout=60,
    )
    details = details_of(tmp_path, "OverallSystemUsage")
    assert details.startswith(f"{IN_PROGRESS}: evaluating {out}: 3 window(s) evaluated")
    assert "the next once its 1 s of data are complete, the last at the job's end" in details
    end_job(out)
    [verdict] = following.result()
    assert verdict.status == NO_ISSUES_FOUND
    assert "evaluated 4 window(s)" in verdict.details
