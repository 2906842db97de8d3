"""``trainprobe run``, run as a user runs it: a subprocess in a terminal-less session.

It prints the training's output and ``[trainprobe]`` progress lines, then the verdicts with
their evidence and where the outputs are; the exit status says how the job ended. The training
(``tests/jobs/plain_training.py``) never imports trainprobe.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trainprobe.jobs import JobStore, describe_training_job

pytestmark = pytest.mark.slow

TRAINING = Path(__file__).resolve().parent.parent / "jobs" / "plain_training.py"


def environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")}


def trainprobe_run(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", "run", *arguments],
        env=environment(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_healthy_run_prints_progress_verdicts_and_outputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    finished = trainprobe_run(
        tmp_path,
        str(TRAINING),
        "--rule",
        "ExplodingTensor",
        "--rule",
        "AllZero:collection_names=losses,weights,name=NoZeros",
        "--rule",
        "LossNotDecreasing:num_steps=2",
        "--save-interval",
        "1",
        "--output",
        str(out),
        "--name",
        "cli-healthy",
        "--",
        "--steps",
        "12",
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    lines = finished.stdout.splitlines()
    assert f"[trainprobe] job cli-healthy started; its files are in {out / 'cli-healthy'}" in lines
    assert "[trainprobe] job cli-healthy: InProgress (Training)" in lines
    assert "[trainprobe] rule ExplodingTensor: NoIssuesFound" in lines
    assert "[trainprobe] rule NoZeros: NoIssuesFound" in lines
    assert "[trainprobe] rule LossNotDecreasing: NoIssuesFound" in lines
    # The training's own output, as it came.
    assert "arguments: ['--steps', '12']" in lines and "finished" in lines
    summary = lines[lines.index("Training job cli-healthy: Completed") :]
    assert "  ExplodingTensor: NoIssuesFound" in summary
    assert "    Steps evaluated: 12" in summary
    assert f"  tensors:   {out / 'cli-healthy' / 'debug-output'}" in summary
    # Debugging rules keep the default ProfilerReport, as SageMaker Debugger's SDK did; it
    # evaluates windows of the profile, which its details count, not steps.
    at = next(i for i, line in enumerate(summary) if line.startswith("  ProfilerReport-"))
    said = list(itertools.takewhile(lambda line: line.startswith("    "), summary[at + 1 :]))
    assert any("window(s)" in line for line in said), said
    assert not any("Steps evaluated" in line for line in said), said
    described = describe_training_job(
        {"TrainingJobName": "cli-healthy"}, store=JobStore(tmp_path / "home" / "jobs.sqlite")
    )
    # LossNotDecreasing's collection was added, saved at the interval asked for.
    collections = described["DebugHookConfig"]["CollectionConfigurations"]
    assert collections == [
        {"CollectionName": "losses", "CollectionParameters": {"save_interval": "1"}}
    ]
    assert described["ProfilingStatus"] == "Enabled"


def test_without_rules_profiler_report_runs_on_the_profiler_output(tmp_path: Path) -> None:
    # Options after the script with no `--` are trainprobe's when all of them are.
    finished = trainprobe_run(tmp_path, str(TRAINING), "--name", "cli-default")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "arguments: []" in finished.stdout
    lines = finished.stdout.splitlines()
    summary = lines[lines.index("Training job cli-default: Completed") :]
    [verdict] = [line for line in summary if line.startswith("  ProfilerReport-")]
    assert verdict.endswith(": NoIssuesFound") or verdict.endswith(": IssuesFound")
    reports = list(
        (tmp_path / "home" / "output" / "cli-default" / "rule-output").glob(
            "ProfilerReport-*/profiler-output/profiler-reports/*.json"
        )
    )
    assert {path.stem for path in reports} >= {"CPUBottleneck", "StepOutlier", "OverallSystemUsage"}
    assert f"  tensors:   {tmp_path / 'home' / 'output' / 'cli-default' / 'debug-output'}" in lines


def test_a_stopped_diverging_run_fails_on_issue_with_its_evidence(tmp_path: Path) -> None:
    finished = trainprobe_run(
        tmp_path,
        str(TRAINING),
        "--rule",
        "ExplodingTensor",
        "--stop-on-issue",
        "--fail-on-issue",
        "--save-interval",
        "1",
        "--no-profiler",
        "--name",
        "cli-nan",
        "--",
        "--steps",
        "100000",
        "--sleep",
        "0.05",
        "--nan-at",
        "5",
    )
    assert finished.returncode == 1, finished.stdout + finished.stderr
    lines = finished.stdout.splitlines()
    assert "Training job cli-nan: Stopped" in lines
    assert any(
        line.startswith("  Stopped by rule ExplodingTensor's StopTraining") for line in lines
    )
    summary = lines[lines.index("Training job cli-nan: Stopped") :]
    assert "  ExplodingTensor: IssuesFound" in summary
    start = summary.index("    Evidence at TRAIN step 5:") + 1
    origin, evidence = summary[start], summary[start + 1 : start + 12]
    # The weights were set to NaN between two steps: the guard names the parameter.
    assert "step 5: first NaN in the parameter `Sequential_0.weight`, before" in origin
    assert any("NaN" in line and "CrossEntropyLoss_output_0" in line for line in evidence)
    assert "finished" not in lines


def test_ctrl_c_stops_the_job(tmp_path: Path) -> None:
    running = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainprobe.cli.main",
            "run",
            str(TRAINING),
            "--no-profiler",
            "--name",
            "cli-interrupted",
            "--",
            "--steps",
            "100000",
            "--sleep",
            "0.05",
        ],
        env=environment(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a test worker may run with SIGINT ignored, which children inherit.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert running.stdout is not None
    seen = []
    for line in running.stdout:
        seen.append(line)
        if "arguments:" in line:  # the training runs
            break
    running.send_signal(signal.SIGINT)
    rest, errors = running.communicate(timeout=120)
    assert running.returncode == 130, "".join(seen) + rest + errors
    assert "[trainprobe] stopping the job (Ctrl-C again to leave it running)" in rest
    assert "Training job cli-interrupted: Stopped" in rest
    assert "  Stopped with Ctrl-C in trainprobe run" in rest


def test_an_unknown_rule_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    finished = trainprobe_run(tmp_path, str(TRAINING), "--rule", "ExplodingTensr", "--")
    assert finished.returncode == 2
    assert "--rule: 'ExplodingTensr' is not valid" in finished.stderr
    assert "Did you mean 'ExplodingTensor'?" in finished.stderr
    assert not (tmp_path / "home" / "output").exists()
