"""`trainprobe validate job.json`, run as a user runs it; and what a command imports to start,
`validate` and `jobs create` being the ones a script calls many times (issue 27)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainprobe.cli.main import COMMAND_MODULES, build_parser, main
from trainprobe.jobs.store import JobStore

RULES_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"

JOB = {
    "TrainingJobName": "demo-1",
    "AlgorithmSpecification": {"TrainingInputMode": "File", "ContainerEntrypoint": ["train.py"]},
    "OutputDataConfig": {"S3OutputPath": "out"},
    "DebugHookConfig": {
        "S3OutputPath": "debug",
        "HookParameters": {"save_interval": "100"},
        "CollectionConfigurations": [
            {
                "CollectionName": "losses",
                "CollectionParameters": {"train.save_interval": "50", "eval.save_interval": "10"},
            }
        ],
    },
    "DebugRuleConfigurations": [
        {
            "RuleConfigurationName": "VanishingGradient",
            "RuleEvaluatorImage": RULES_IMAGE,
            "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "1e-5"},
        }
    ],
    "ProfilerConfig": {
        "ProfilingIntervalInMilliseconds": 1000,
        "ProfilingParameters": {
            "DetailedProfilingConfig": '{"StartStep": 5, "NumSteps": 3, }',
            "PythonProfilingConfig": '{"StartStep": 9, "NumSteps": 3, "ProfilerName": '
            '"cprofile", "cProfileTimer": "cpu_time", }',
        },
    },
    "ProfilerRuleConfigurations": [
        {
            "RuleConfigurationName": "ProfilerReport",
            "RuleEvaluatorImage": RULES_IMAGE,
            "RuleParameters": {
                "rule_to_invoke": "ProfilerReport",
                "CPUBottleneck_cpu_threshold": "90",
            },
        }
    ],
}


def validate(path: Path | str) -> subprocess.CompletedProcess[str]:
    """``trainprobe validate path``, run in the request's directory (where train.py is), with a
    trainprobe home of its own."""
    directory = Path(str(path).removeprefix("file://")).parent
    (directory / "train.py").touch()
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", "validate", str(path)],
        capture_output=True,
        text=True,
        cwd=directory,
        env={**os.environ, "TRAINPROBE_HOME": str(directory / "home")},
    )


def test_a_valid_request_prints_what_would_run(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(JOB))
    result = validate(f"file://{path}")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "demo-1: valid" in out
    # The collection's schedule per mode: its own keys over the hook's.
    assert "train    every 50 steps" in out
    assert "eval     every 10 steps" in out
    assert "predict  every 100 steps" in out
    # Rules with their effective parameters: overrides and defaults.
    assert "threshold = 1e-05" in out
    assert "CPUBottleneck_cpu_threshold = 90" in out
    # The profiling ranges, with SageMaker's defaults where nothing was said.
    assert "every 1000 ms" in out
    assert "detailed profiling: steps 5-7" in out
    assert "Python profiling: steps 9-11" in out
    assert "timer cpu_time" in out
    assert "data loader profiling: off" in out
    # VanishingGradient reads gradients, which this job does not save.
    assert "reads collection gradients" in out


def test_an_invalid_request_lists_every_problem_and_exits_1(tmp_path: Path) -> None:
    job = json.loads(json.dumps(JOB))
    job["TrainingJobName"] = "demo_1"
    job["DebugRuleConfigurations"][0]["RuleParameters"]["rule_to_invoke"] = "VanishingGradients"
    job["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] = 250
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    result = validate(path)
    assert result.returncode == 1
    out = result.stdout
    assert "3 problem(s)" in out
    assert "TrainingJobName" in out
    assert "Did you mean 'VanishingGradient'" in out
    assert "100, 200, 500, 1000, 5000, 60000" in out


def test_malformed_json_points_at_the_line(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text('{\n  "TrainingJobName": "demo-1"\n  "HyperParameters": {}\n}\n')
    result = validate(path)
    assert result.returncode == 1
    assert "line 3" in result.stdout


# ----- what starting a command costs ------------------------------------------------------------

# What `validate` and `jobs create` do not use: a web server, plotting, frames, training
# frameworks, AWS's client, rich's console, numpy.
_NOT_FOR_CREATING = (
    "numpy",
    "torch",
    "xgboost",
    "pandas",
    "plotly",
    "starlette",
    "uvicorn",
    "botocore",
    "rich",
)
_IMPORTED = """
import json, sys
from trainprobe.cli.main import main
status = main(sys.argv[1:])
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
sys.exit(status)
"""


def _imported(arguments: list[str], cwd: Path) -> tuple[int, list[str]]:
    """The exit status of ``trainprobe ARGUMENTS`` and which of _NOT_FOR_CREATING it imported."""
    result = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "TRAINPROBE_HOME": str(cwd / "home")},
    )
    assert result.stdout, result.stderr
    packages = json.loads(result.stdout.splitlines()[-1])
    return result.returncode, [name for name in _NOT_FOR_CREATING if name in packages]


def test_validate_and_jobs_create_import_only_what_they_use(tmp_path: Path) -> None:
    # Issue 27: `jobs create` took over a second a call, most of it importing the web server,
    # numpy, rich and the rules' readers; a script creating many jobs was bound by it.
    (tmp_path / "train.py").touch()
    request = tmp_path / "job.json"
    request.write_text(json.dumps(JOB))
    assert _imported(["validate", str(request)], tmp_path) == (0, [])
    job = {
        "TrainingJobName": "quick-start",
        "AlgorithmSpecification": {"ContainerEntrypoint": ["true"]},
        "OutputDataConfig": {"S3OutputPath": "out"},
        "ProfilerConfig": {"DisableProfiler": True},
    }
    request.write_text(json.dumps(job))
    assert _imported(["jobs", "create", "--cli-input-json", f"file://{request}"], tmp_path) == (
        0,
        [],
    )
    store = JobStore(tmp_path / "home" / "jobs.sqlite")
    deadline = time.monotonic() + 120
    while not all(record.runner_done for record in store.query()):
        assert time.monotonic() < deadline, "the job's runner did not end"
        time.sleep(0.2)
    assert store.names() == ["quick-start"]


def test_each_command_is_parsed_alone_as_in_the_whole_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Only the named command's module is imported: its parser must be the one --help lists.
    (commands,) = [
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    assert set(commands.choices) == set(COMMAND_MODULES)
    for name, parser in commands.choices.items():
        with pytest.raises(SystemExit) as exited:
            main([name, "--help"])
        assert exited.value.code == 0
        assert capsys.readouterr().out == parser.format_help()
