"""The child-process layer every job process goes through: bound to its parent, stopped one way,
its end put in words, its limits applied; and the settings those limits come from."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from timing import wait_until
from trainprobe.config.errors import ConfigError
from trainprobe.jobs.child_process import ChildLimits, ChildProcess, describe_exit, stop_together
from trainprobe.jobs.runner.process_settings import process_settings

SRC = str(Path(__file__).resolve().parents[2] / "src")


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_ends_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, time
                from trainprobe.jobs.child_process import ChildProcess
                sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
                child = ChildProcess("sleeper", sleep, cwd=".")
                print(child.pid, flush=True)
                time.sleep(600)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    assert psutil.Process(child_pid).is_running()
    parent.kill()
    parent.wait()
    assert gone(child_pid), "the child outlived the process that started it"


def test_stop_ends_the_whole_group_and_says_how(tmp_path: Path) -> None:
    # A child that ignores SIGTERM, and a grandchild in its group.
    script = textwrap.dedent(
        """
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(grandchild.pid, flush=True)
        time.sleep(600)
        """
    )
    log = tmp_path / "child.log"
    child = ChildProcess(
        "stubborn", [sys.executable, "-c", script], cwd=str(tmp_path), log_path=str(log)
    )
    deadline = time.monotonic() + 30
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    grandchild = int(log.read_text().split()[0])
    assert child.running and child.ending() is None

    returncode = child.stop(grace_seconds=0.5)

    assert returncode == -signal.SIGKILL
    assert child.ending() == "was killed by signal 9 (SIGKILL)"
    assert gone(grandchild)


def test_children_stopped_together_each_get_sigterm_then_sigkill(tmp_path: Path) -> None:
    # One child ends on SIGTERM; the other ignores it, so the shared grace ends in SIGKILL.
    ignore = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    scripts = [
        "import time; print(1, flush=True); time.sleep(600)",
        ignore + "print(1, flush=True); time.sleep(600)",
    ]
    logs = [tmp_path / f"child{index}.log" for index in range(2)]
    children = [
        ChildProcess(
            f"child{index}", [sys.executable, "-c", script], cwd=str(tmp_path), log_path=str(log)
        )
        for index, (script, log) in enumerate(zip(scripts, logs, strict=True))
    ]
    wait_until(
        lambda: all(log.read_text().strip() for log in logs), "both children to start", timeout=30
    )

    assert stop_together(children, grace_seconds=0.5) == [-signal.SIGTERM, -signal.SIGKILL]
    assert not any(child.running for child in children)


def test_how_a_process_ended_in_words() -> None:
    assert describe_exit(0) == "exited with status 0"
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(-15) == "was killed by signal 15 (SIGTERM)"


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity here")
def test_limits_hold_in_the_child(tmp_path: Path) -> None:
    cpu = sorted(os.sched_getaffinity(0))[-1]
    report = tmp_path / "limits.json"
    script = textwrap.dedent(
        f"""
        import json, os, resource
        json.dump({{"nice": os.nice(0), "data": resource.getrlimit(resource.RLIMIT_DATA)[0],
                   "cpus": sorted(os.sched_getaffinity(0))}}, open({str(report)!r}, "w"))
        """
    )
    before = os.nice(0)
    child = ChildProcess(
        "limited",
        [sys.executable, "-c", script],
        cwd=str(tmp_path),
        limits=ChildLimits(niceness=5, memory_limit_mb=900, cpus=frozenset({cpu})),
    )
    assert child.wait(60) == 0
    seen = json.loads(report.read_text())
    assert seen == {"nice": min(19, before + 5), "data": 900 * 1024 * 1024, "cpus": [cpu]}
    assert os.nice(0) == before  # the parent's own stay as they were


def test_process_settings_defaults_and_bad_values() -> None:
    settings = process_settings({})
    assert settings.rule_niceness == 10
    assert settings.rule_memory_limit_mb == 2048
    assert settings.rule_progress_timeout_seconds == 120.0
    assert settings.rule_cpus >= 1
    limits = process_settings({"TRAINPROBE_RULE_MEMORY_LIMIT_MB": "0"}).rule_limits()
    assert limits.memory_limit_mb is None
    for name, value in (
        ("TRAINPROBE_RULE_NICENESS", "20"),
        ("TRAINPROBE_RULE_MEMORY_LIMIT_MB", "lots"),
        ("TRAINPROBE_RULE_PROGRESS_TIMEOUT_SECONDS", "0"),
        ("TRAINPROBE_STOP_GRACE_SECONDS", "-1"),
    ):
        with pytest.raises(ConfigError) as raised:
            process_settings({name: value})
        assert name in str(raised.value) and value in str(raised.value)
