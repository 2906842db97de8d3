"""ProfilerReport and the profiler rule runner: every rule on the same windows, ``<Rule>_<param>``
overrides, the per-rule report JSON, following a live job, statuses, and the command line.

Spec 000 (ProfilerReport runs the profiler rules; ``rule_configs.ProfilerReport`` takes custom
parameter values) and reference/smdebug.md §5.3 (the report JSON per rule under
``profiler-output/profiler-reports/``, its keys, and IssuesFound when any rule fired).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_profiler_data import (
    T0,
    definition,
    end_job,
    evaluate,
    follow,
    host,
    report_of,
    runner,
    status_of,
    write_system,
)

from timing import wait_until
from trainprobe.config import catalogue
from trainprobe.config.errors import ConfigError
from trainprobe.debugger import ProfilerRule, rule_configs
from trainprobe.rules.profiler_rules import LoadBalancing, ProfilerRuleDefinition
from trainprobe.rules.verdict import ERROR, IN_PROGRESS, ISSUES_FOUND, NO_ISSUES_FOUND, STOPPED
from trainprobe.storage.rule_output import read_evaluations
from trainprobe.storage.system_metrics import MetricKey, SystemMetricsWriter

RULES = [spec.name for spec in catalogue.get("ProfilerReport").runs]
SAGEMAKER_KEYS = ["RuleTriggered", "Violations", "Datapoints", "RuleParameters", "Details"]
SMALL = {
    "scan_interval_us": "2000000",
    **{f"{rule}_patience": "10" for rule in ("BatchSize", "CPUBottleneck", "LowGPUUtilization")},
    "BatchSize_window": "20",
    "LowGPUUtilization_window": "20",
}


def busy_cpu_idle_gpu_job(tmp_path: Path) -> Path:
    """Ten seconds of a saturated CPU and an idle GPU, then the end of the job."""
    out = tmp_path / "profiler-output"
    write_system(out, [host(cpu=97.0, gpus=[(3.0, 20.0)]) for _ in range(100)])
    end_job(out)
    return tmp_path


def test_the_report_runs_every_rule_and_writes_each_ones_report(tmp_path: Path) -> None:
    job = busy_cpu_idle_gpu_job(tmp_path)
    config = ProfilerRule.sagemaker(rule_configs.ProfilerReport(**SMALL), name="ProfilerReport-1")

    [verdict] = evaluate([ProfilerRuleDefinition.from_config(config)], job)

    assert verdict.name == "ProfilerReport-1" and verdict.status == ISSUES_FOUND
    assert status_of(job, "ProfilerReport-1") == ISSUES_FOUND
    reports_dir = job / "rule-output/ProfilerReport-1/profiler-output/profiler-reports"
    assert sorted(path.stem for path in reports_dir.glob("*.json")) == sorted(RULES)
    assert len(RULES) == 11
    for rule in RULES:
        report = report_of(job, rule, "ProfilerReport-1")
        assert list(report)[:5] == SAGEMAKER_KEYS
        assert report["Rule"] == rule and report["Windows"] == 5
        assert report["Recommendation"]
    cpu = report_of(job, "CPUBottleneck", "ProfilerReport-1")
    assert cpu["RuleTriggered"] == 5  # each window has 20 samples, more than the patience of 10
    assert "patience:10\n" in cpu["RuleParameters"] and "threshold:50" in cpu["RuleParameters"]
    assert report_of(job, "BatchSize", "ProfilerReport-1")["RuleTriggered"] == 0
    assert report_of(job, "LowGPUUtilization", "ProfilerReport-1")["RuleTriggered"] > 0
    assert "CPUBottleneck (5 window(s))" in verdict.details
    # One evaluation line per window, with the window's span.
    lines = read_evaluations(str(job / "rule-output/ProfilerReport-1"))
    assert [line["step"] for line in lines] == [0, 1, 2, 3, 4]
    assert lines[1]["window_start_us"] == pytest.approx((T0 + 2) * 1e6)
    assert lines[1]["evidence"][0]["message"].startswith("CPUBottleneck: bottlenecks in 100.0 %")


def test_an_override_changes_only_its_rule(tmp_path: Path) -> None:
    job = busy_cpu_idle_gpu_job(tmp_path)
    report = definition("ProfilerReport", **SMALL, CPUBottleneck_threshold="100")

    [verdict] = evaluate([report], job)

    cpu = report_of(job, "CPUBottleneck", "ProfilerReport")
    assert cpu["RuleTriggered"] == 0 and cpu["Parameters"]["threshold"] == 100
    assert "threshold:100" in cpu["RuleParameters"]
    assert report_of(job, "IOBottleneck", "ProfilerReport")["Parameters"]["threshold"] == 50
    assert verdict.status == ISSUES_FOUND  # LowGPUUtilization still finds the idle GPU
    assert "CPUBottleneck" not in verdict.details


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("CPUBottleneck_treshold", "CPUBottleneck_threshold"),
        ("CPUBotleneck_threshold", "CPUBottleneck_threshold"),
    ],
)
def test_a_misspelt_override_is_refused_before_anything_runs(
    tmp_path: Path, key: str, suggestion: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        definition("ProfilerReport", **{key: "20"})
    assert raised.value.suggestion == suggestion
    assert not (tmp_path / "rule-output").exists()


def test_an_override_out_of_range_names_the_field() -> None:
    with pytest.raises(ConfigError) as raised:
        definition("ProfilerReport", CPUBottleneck_cpu_threshold="120")
    assert raised.value.field == "RuleParameters.CPUBottleneck_cpu_threshold"
    assert "100" in raised.value.allowed


def test_a_failing_rule_is_set_aside_and_the_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(self: LoadBalancing, window: object) -> bool:
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(LoadBalancing, "evaluate_window", fail)
    job = busy_cpu_idle_gpu_job(tmp_path)

    [verdict] = evaluate([definition("ProfilerReport", **SMALL)], job)

    assert verdict.status == ISSUES_FOUND
    assert "failed: LoadBalancing" in verdict.details
    assert (
        "RuntimeError: broken on purpose"
        in report_of(job, "LoadBalancing", "ProfilerReport")["Error"]
    )
    assert report_of(job, "CPUBottleneck", "ProfilerReport")["Windows"] == 5


class LiveHost(threading.Thread):
    """A host's system monitor, played in real time: one idle-GPU sample every 50 ms."""

    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True)
        self.out = out
        self.done = threading.Event()

    def run(self) -> None:
        writer = SystemMetricsWriter(str(self.out), "algo-1", publish_seconds=0.1)
        while not self.done.is_set():
            rows = host(cpu=30.0, gpus=[(2.0, 20.0)])
            writer.write(time.time(), [(MetricKey(t, n, d), v) for t, n, d, v in rows])
            time.sleep(0.05)
        writer.close()


def test_the_report_follows_a_live_job_window_by_window(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    live = LiveHost(out)
    live.start()
    overrides = {"scan_interval_us": "500000", "LowGPUUtilization_patience": "5"}
    following = follow([definition("ProfilerReport", **overrides)], tmp_path)
    try:
        # Reports appear, and grow, while the job runs; each file is always whole JSON.
        # The reports of a window are written one file after another: wait for this one.
        wait_until(
            lambda: (
                tmp_path
                / "rule-output/ProfilerReport/profiler-output/profiler-reports"
                / "OverallSystemUsage.json"
            ).exists(),
            "the first window's reports",
        )
        first = report_of(tmp_path, "OverallSystemUsage", "ProfilerReport")["Windows"]
        wait_until(
            lambda: report_of(tmp_path, "OverallSystemUsage", "ProfilerReport")["Windows"] > first,
            "a later window",
        )
        assert status_of(tmp_path, "ProfilerReport") in (IN_PROGRESS, ISSUES_FOUND)
        wait_until(lambda: status_of(tmp_path, "ProfilerReport") == ISSUES_FOUND, "the issue")
        assert following.is_alive()  # an issue does not end the evaluation
    finally:
        live.done.set()
        live.join()
    end_job(out)
    [verdict] = following.result()

    assert verdict.status == ISSUES_FOUND
    usage = report_of(tmp_path, "OverallSystemUsage", "ProfilerReport")
    written = sum(1 for _ in out.glob("system/incremental/*/*.json"))
    assert written >= 1
    assert usage["Datapoints"] == usage["Details"]["nodes"]["algo-1"]["CPU"]["count"]


def test_a_job_that_ends_without_data_ends_in_error(tmp_path: Path) -> None:
    (tmp_path / "profiler-output").mkdir()
    end_job(tmp_path / "profiler-output")

    [verdict] = evaluate([definition("ProfilerReport")], tmp_path)

    assert verdict.status == ERROR
    assert "ended without system metrics or framework events" in verdict.details


def test_no_data_within_the_timeout_ends_in_error(tmp_path: Path) -> None:
    [verdict] = evaluate([definition("CPUBottleneck")], tmp_path, no_data_timeout=0.3)

    assert verdict.status == ERROR
    assert "no data appeared within 0.3 s" in verdict.details


def test_stop_ends_the_rules_as_stopped(tmp_path: Path) -> None:
    write_system(tmp_path / "profiler-output", [host()] * 5)
    run = runner([definition("CPUBottleneck"), definition("StepOutlier")], tmp_path)
    thread = threading.Thread(target=run.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: status_of(tmp_path, "StepOutlier") == IN_PROGRESS, "the rules' start")
    finally:
        run.stop()
        thread.join(30)

    assert [e.verdict.status for e in run.evaluators] == [STOPPED, STOPPED]
    assert status_of(tmp_path, "CPUBottleneck") == STOPPED


def run_command(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "trainprobe.rules.profiler_rules", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_command_line_runs_the_report_and_exits_by_its_verdict(tmp_path: Path) -> None:
    job = busy_cpu_idle_gpu_job(tmp_path)
    out, rules = str(job / "profiler-output"), str(job / "rule-output")
    params = [f"--param={key}={value}" for key, value in SMALL.items()]

    found = run_command(out, "--rule-output", rules, "--poll-interval", "0.05", *params)

    assert found.returncode == 1, found.stderr
    assert "ProfilerReport: IssuesFound" in found.stdout
    assert "CPUBottleneck: triggered in 5 window(s)" in found.stdout
    assert "Increase num_workers of your DataLoader" in found.stdout
    quiet = run_command(out, "--rule", "BatchSize", "--param", "patience=10", "--name", "b")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.startswith("b: NoIssuesFound")


def test_the_command_line_reads_the_rules_of_a_request(tmp_path: Path) -> None:
    job = busy_cpu_idle_gpu_job(tmp_path)
    request = {
        "ProfilerRuleConfigurations": [
            {
                "RuleConfigurationName": "cpu",
                "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
                "RuleParameters": {"rule_to_invoke": "CPUBottleneck", "patience": "10"},
            },
            {
                "RuleConfigurationName": "steps",
                "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
                "RuleParameters": {"rule_to_invoke": "StepOutlier"},
            },
        ]
    }
    (tmp_path / "request.json").write_text(json.dumps(request))
    out, rules = str(job / "profiler-output"), str(job / "rule-output")

    done = run_command(out, "--rule-output", rules, "--request", str(tmp_path / "request.json"))

    assert done.returncode == 1, done.stderr
    assert "cpu: IssuesFound" in done.stdout and "steps: NoIssuesFound" in done.stdout
    assert status_of(job, "steps") == NO_ISSUES_FOUND


def test_the_command_line_refuses_a_bad_parameter_with_a_suggestion(tmp_path: Path) -> None:
    refused = run_command(str(tmp_path), "--rule", "CPUBottleneck", "--param", "treshold=5")

    assert refused.returncode == 2
    assert "treshold" in refused.stderr and "Did you mean 'threshold'?" in refused.stderr
