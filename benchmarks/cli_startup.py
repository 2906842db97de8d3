"""How many calls a second ``trainprobe`` answers: the start-up a script pays on every call.

Issue 27 saw a script creating 288 jobs with ``trainprobe jobs create --cli-input-json`` spend
over a second a call on a 2-core machine, most of it importing what a create does not use. In a
throwaway trainprobe home, this runs each command ``--calls`` times, one call after another:

- ``python -c pass``: the interpreter alone, the floor every command stands on;
- ``trainprobe --help``;
- ``trainprobe validate job.json``;
- ``trainprobe jobs create --cli-input-json file://job.json``: a job that runs ``true``, with no
  rules and the profiler off. Only the command is timed: its job's runner is let finish before
  the next call, so that it does not take the CPU from the next one.

and prints calls a second of each, and each one's time a call over ``python -c pass``'s,
measured in the same run. Then what one more create imports (``python -X importtime``): the
slowest imports, and which heavy packages are among them. Nothing is asserted.

    python benchmarks/cli_startup.py [--calls 20] [--src OTHER/src]

Measured on the project's 2-core machine while other work kept it busy (load average 5 to 20),
10 calls each, before (commit 277d68b) and after ``trainprobe.cli.main`` imported only the named
command's module and ``jobs create`` only what creating needs (no numpy, rich, starlette,
uvicorn, botocore: 1.2-1.5 s of imports down to about 0.2 s), three runs of each, before and
after side by side:

    command                    before (calls/s)      after (calls/s)
    python -c pass             12.2  10.9  19.9      13.2  14.5  18.9
    trainprobe validate         0.3   0.3   0.4       1.7   3.5   1.8
    trainprobe jobs create      0.3   0.5   0.2       1.1   1.7   1.1

``trainprobe --help`` still imports every command (0.3 to 0.7 calls/s both ways).

``--src`` measures the trainprobe in another checkout's ``src`` instead (``git archive`` an
earlier commit into a folder) for a before and after on one machine; the commands run as
``python -m trainprobe.cli.main``, as the console script does, both ways.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from trainprobe.jobs.store import JobStore  # noqa: E402

_HEAVY = (
    "numpy",
    "torch",
    "pandas",
    "plotly",
    "starlette",
    "uvicorn",
    "botocore",
    "rich",
    "psutil",
)


def _request(name: str, root: Path) -> dict[str, object]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingInputMode": "File", "ContainerEntrypoint": ["true"]},
        "RoleArn": "arn:aws:iam::123456789012:role/local",
        "HyperParameters": {"epochs": "1"},
        "OutputDataConfig": {"S3OutputPath": str(root / "out")},
        "ResourceConfig": {"InstanceCount": 1, "InstanceType": "local", "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "ProfilerConfig": {"DisableProfiler": True},
    }


def _run(command: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds ``command`` took; it must succeed."""
    start = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr}")
    return elapsed


def _wait_for_runners(store: JobStore, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while any(not record.runner_done for record in store.query()):
        if time.monotonic() > deadline:
            raise SystemExit("a job's runner did not finish in time")
        time.sleep(0.05)


def _create_file(root: Path, index: int) -> Path:
    path = root / f"job-{index}.json"
    path.write_text(json.dumps(_request(f"startup-{index}", root)))
    return path


def _slowest_imports(stderr: str, count: int = 8) -> tuple[list[tuple[float, str]], list[str]]:
    """The slowest imports (ms, name) of an ``-X importtime`` log, outermost ones only, and the
    heavy packages that were imported at all."""
    outermost: list[tuple[float, str]] = []
    imported: set[str] = set()
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        if not cumulative.strip().isdigit():
            continue
        imported.add(name.strip().split(".")[0])
        if not name.startswith("  "):  # one space of indent: imported by the command itself
            outermost.append((int(cumulative) / 1000, name.strip()))
    outermost.sort(reverse=True)
    return outermost[:count], [package for package in _HEAVY if package in imported]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="calls of each command")
    parser.add_argument("--src", type=Path, help="measure the trainprobe in this src folder")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="trainprobe-startup-"))
    try:
        env = {**os.environ, "TRAINPROBE_HOME": str(root / "home")}
        if args.src is not None:
            env["PYTHONPATH"] = str(args.src.resolve())
        store = JobStore(root / "home" / "jobs.sqlite")
        trainprobe = [sys.executable, "-m", "trainprobe.cli.main"]
        # Compiled once, as an install does: a call must not be timed compiling modules.
        compileall.compile_dir(args.src or REPO / "src", quiet=1)
        validate_file = _create_file(root, -1)
        commands = {
            "python -c pass": lambda index: [sys.executable, "-c", "pass"],
            "trainprobe --help": lambda index: [*trainprobe, "--help"],
            "trainprobe validate": lambda index: [*trainprobe, "validate", str(validate_file)],
            "trainprobe jobs create": lambda index: [
                *trainprobe,
                "jobs",
                "create",
                "--cli-input-json",
                f"file://{_create_file(root, index)}",
            ],
        }
        seconds: dict[str, float] = {}
        for label, command in commands.items():
            total = 0.0
            for index in range(args.calls):
                total += _run(command(index), env, root)
                _wait_for_runners(store)
            seconds[label] = total / args.calls
        floor = seconds["python -c pass"]
        measured = args.src or REPO / "src"
        print(f"trainprobe from {measured}: {args.calls} calls each ({os.cpu_count()} CPUs)")
        for label, per_call in seconds.items():
            print(
                f"  {label:24} {1 / per_call:6.1f} calls/s  {per_call * 1000:7.1f} ms/call  "
                f"{per_call / floor:5.1f} x python -c pass"
            )
        create = [
            sys.executable,
            "-X",
            "importtime",
            *trainprobe[1:],
            "jobs",
            "create",
            "--cli-input-json",
            f"file://{_create_file(root, args.calls)}",
        ]
        result = subprocess.run(create, env=env, cwd=root, capture_output=True, text=True)
        _wait_for_runners(store)
        slowest, heavy = _slowest_imports(result.stderr)
        print("what `trainprobe jobs create` imports, slowest first (cumulative ms):")
        for milliseconds, name in slowest:
            print(f"  {milliseconds:7.1f}  {name}")
        print(f"  heavy packages imported: {', '.join(heavy) or 'none'}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
