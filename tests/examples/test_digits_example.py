"""The README's main example: the digits training, run under ``trainprobe run`` as it ships."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from browser import open_page
from trainprobe.cli import run_command
from trainprobe.debugger import FrameworkProfile
from trainprobe.jobs import JobStore, describe_training_job

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "examples" / "digits" / "train.py"
TRAINPROBE = [sys.executable, "-m", "trainprobe.cli.main"]


def _request(*arguments: str) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    subcommands = parser.add_subparsers()
    run_command.register(subcommands)
    options = argparse.ArgumentParser(add_help=False)
    run_command._add_options(options)
    args = parser.parse_args(["run", str(DIGITS), *arguments])
    run_command._split_arguments(args, options)
    return run_command.build_request(args)


def test_the_digits_example_trains_under_trainprobe_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    finished = subprocess.run(
        [
            *TRAINPROBE,
            "run",
            str(DIGITS),
            "--rule",
            "ExplodingTensor",
            "--rule",
            "ProfilerReport",
            "--save-interval",
            "10",
            "--name",
            "digits-1",
            "--",
            "--epochs",
            "2",
        ],
        env={**os.environ, "TRAINPROBE_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "final eval accuracy" in finished.stdout
    assert "Training job digits-1: Completed" in finished.stdout
    assert "ExplodingTensor: NoIssuesFound" in finished.stdout

    description = describe_training_job(
        {"TrainingJobName": "digits-1"}, store=JobStore(home / "jobs.sqlite")
    )
    assert description["TrainingJobStatus"] == "Completed"
    accuracy = float(finished.stdout.split("final eval accuracy:")[1].split()[0])
    assert accuracy > 0.5  # ten classes: chance is 0.1
    job_dir = home / "output" / "digits-1"
    assert (job_dir / "output" / "model" / "model.pt").is_file()
    steps = sorted(p.name for p in (job_dir / "debug-output" / "index").rglob("*.json"))
    assert steps, "the hook saved no step"
    # The step timeline is on by default: the hook's profiler wrote pevents trace files.
    timelines = list((job_dir / "profiler-output" / "framework" / "pevents").rglob("*.json"))
    assert timelines, "no step timeline under profiler-output"
    text = timelines[0].read_text().rstrip()
    events = json.loads(text if text.endswith("]") else text.rstrip(",") + "]")
    assert any(str(event.get("name", "")).startswith("Step") for event in events)
    assert list((job_dir / "profiler-output" / "system").rglob("*"))

    # The runner wrote the profiler report when the job ended, and `trainprobe run` says where.
    [report] = (job_dir / "rule-output").glob(
        "ProfilerReport*/profiler-output/profiler-report.html"
    )
    assert f"Report: {report}" in finished.stdout
    content = json.loads(report.with_suffix(".json").read_text())
    assert content["Job"]["Steps"] > 0
    # Each epoch's training batches are TRAIN steps, its one evaluation forward an EVAL step.
    by_mode = {p["Mode"]: p["Steps"] for p in content["StepDurations"]["Processes"]}
    assert by_mode["EVAL"] == 2
    assert by_mode["TRAIN"] + by_mode["EVAL"] == content["Job"]["Steps"]
    assert len(content["Rules"]["Rules"]) == 11
    [worker] = content["DebuggerOverhead"]["Workers"]
    assert worker["Steps"] > 0 and worker["BytesWritten"] > 0
    # `trainprobe report` rebuilds it by the job's name, for any output.
    rebuilt = subprocess.run(
        [*TRAINPROBE, "report", "digits-1", "--out", str(tmp_path / "rebuilt")],
        env={**os.environ, "TRAINPROBE_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    again = json.loads((tmp_path / "rebuilt" / "profiler-report.json").read_text())
    assert again["Job"] == content["Job"]
    visit = open_page(report, tmp_path / "report.png")
    assert visit.console_errors == visit.page_errors == []
    assert visit.plots_drawn == visit.plots_with_traces == visit.plots > 5


def test_the_step_timeline_is_asked_for_by_default_and_framework_profile_adds_sagemakers() -> None:
    plain = _request()
    assert plain["ProfilerConfig"]["ProfilingParameters"] == {}  # type: ignore[index]
    full = _request("--framework-profile")
    parameters = full["ProfilerConfig"]["ProfilingParameters"]  # type: ignore[index]
    expected = dict(FrameworkProfile().profiling_parameters)
    del expected["LocalPath"]  # the job runner sets it to the job's profiler-output
    assert parameters == expected
    assert "ProfilerConfig" not in _request("--no-profiler")


def test_the_demo_sets_up_then_runs_the_example_with_the_arguments_given(tmp_path: Path) -> None:
    """scripts/demo in a copy whose setup and trainprobe only say how they were called."""
    copy = tmp_path / "checkout"
    (copy / "scripts").mkdir(parents=True)
    (copy / ".venv" / "bin").mkdir(parents=True)
    demo = copy / "scripts" / "demo"
    demo.write_bytes((ROOT / "scripts" / "demo").read_bytes())
    calls = tmp_path / "calls"
    for path, text in (
        (copy / "scripts" / "setup", f'echo setup >> "{calls}"\n'),
        (copy / ".venv" / "bin" / "trainprobe", f'echo "trainprobe $*" >> "{calls}"\n'),
    ):
        path.write_text("#!/bin/sh\n" + text)
        path.chmod(0o755)
    demo.chmod(0o755)
    environment = {**os.environ, "PYTHON": sys.executable}
    for arguments in ([], ["--rule", "ExplodingTensor", "--", "--epochs", "1"]):
        subprocess.run([str(demo), *arguments], env=environment, check=True, timeout=60)
    assert calls.read_text().splitlines() == [
        "setup",
        "trainprobe run examples/digits/train.py --",
        "setup",
        "trainprobe run examples/digits/train.py --rule ExplodingTensor -- --epochs 1",
    ]
