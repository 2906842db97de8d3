"""Where a job's rules run: start a rule evaluator, poll how it is doing, stop it.

The job runner sees rule evaluators only through ``RuleExecutor`` and ``RuleExecution``, so that
another executor (a Dask cluster) can take the local one's place. ``LocalRuleExecutor`` runs each
evaluator as a ``ChildProcess`` of the runner, under the rules' limits (lower CPU priority, a
memory limit, a share of the cores), and watches its heartbeat
(``trainprobe.jobs.processes.rule_heartbeat``):

- ``poll()`` is None while the evaluator runs and makes progress; once it has ended it says how,
  in the words a rule's status gives: "the rule process exited with status 0", "the rule process
  was killed by signal 9 (SIGKILL)", "the rule process exceeded its memory limit of 2048 MB";
- an evaluator that makes no progress for the progress timeout is ended at once, and ``poll()``
  says "no progress for 120 s: the rule process was stopped". Until its first beat (it is still
  starting: importing, reading its configuration) it has ``START_SECONDS`` at least.

The runner then records the rules the evaluator left unfinished as Error with that reason.

Which executor a job uses is decided by ``trainprobe.jobs.runner.rule_executor_choice``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from trainprobe.jobs.child_process import ChildLimits, ChildProcess, describe_exit
from trainprobe.jobs.processes.rule_heartbeat import create_heartbeat, seconds_since_beat

__all__ = [
    "LocalRuleExecution",
    "LocalRuleExecutor",
    "ProgressWatch",
    "RuleExecution",
    "RuleExecutor",
    "RuleLaunch",
]

START_SECONDS = 120.0
_LOG_TAIL_BYTES = 8192
_OUT_OF_MEMORY = (
    "MemoryError",
    "can't allocate memory",
    "std::bad_alloc",
    "Cannot allocate memory",
)


@dataclass(frozen=True)
class RuleLaunch:
    """One rule evaluator to start: the rules it evaluates and its command line.

    ``heartbeat_path`` is the file it touches while it makes progress (its command tells it);
    ``log_path`` receives its output.
    """

    label: str
    rule_names: tuple[str, ...]
    command: tuple[str, ...]
    cwd: str
    log_path: str
    heartbeat_path: str


class RuleExecution(Protocol):
    """A started rule evaluator."""

    launch: RuleLaunch

    def poll(self) -> str | None:
        """None while it runs; once it has ended, how (a sentence for the rules' status)."""
        ...

    def stop(self, grace_seconds: float) -> None:
        """Ask it to stop (its rules end Stopped); end it after ``grace_seconds``."""
        ...


class RuleExecutor(Protocol):
    """Starts rule evaluators."""

    def start(self, launch: RuleLaunch) -> RuleExecution:
        """Start ``launch``; OSError when it cannot be started."""
        ...

    def close(self) -> None:
        """Let go of what it holds, once its evaluators have ended."""
        ...


class ProgressWatch:
    """Whether a rule evaluator is stuck, from its heartbeat at ``heartbeat_path`` (created
    now): no beat for ``timeout_seconds``, or ``START_SECONDS`` before its first beat."""

    def __init__(self, heartbeat_path: str, timeout_seconds: float) -> None:
        self.heartbeat_path = heartbeat_path
        self.timeout_seconds = timeout_seconds
        create_heartbeat(heartbeat_path)
        self._first_beat: float | None = os.stat(heartbeat_path).st_mtime

    def stuck(self) -> bool:
        """Whether it has shown no progress for longer than it is allowed."""
        quiet = seconds_since_beat(self.heartbeat_path)
        allowed = self.timeout_seconds
        if self._starting():
            allowed = max(allowed, START_SECONDS)
        return quiet is not None and quiet > allowed

    def _starting(self) -> bool:
        if self._first_beat is None:
            return False
        try:
            beaten = os.stat(self.heartbeat_path).st_mtime != self._first_beat
        except OSError:
            return False
        if beaten:
            self._first_beat = None
        return not beaten


class LocalRuleExecution:
    """A rule evaluator running as a child process of the runner (see the module docstring)."""

    def __init__(
        self,
        launch: RuleLaunch,
        *,
        limits: ChildLimits,
        environment: Mapping[str, str] | None,
        progress_timeout_seconds: float,
    ) -> None:
        self.launch = launch
        self.limits = limits
        self.progress_timeout_seconds = progress_timeout_seconds
        self.progress = ProgressWatch(launch.heartbeat_path, progress_timeout_seconds)
        self.child = ChildProcess(
            launch.label,
            launch.command,
            cwd=launch.cwd,
            environment=environment,
            log_path=launch.log_path,
            limits=limits,
        )
        self._ending: str | None = None

    def poll(self) -> str | None:
        """None while it runs; once it has ended, how (see the module docstring)."""
        if self._ending is not None:
            return self._ending
        returncode = self.child.poll()
        if returncode is None:
            if not self.progress.stuck():
                return None
            self.child.stop(0)
            self._ending = (
                f"no progress for {self.progress_timeout_seconds:g} s: the rule process was stopped"
            )
            return self._ending
        self.child.stop(0)  # whatever it started
        self._ending = self._explain(returncode)
        return self._ending

    def _explain(self, returncode: int) -> str:
        limit = self.limits.memory_limit_mb
        if returncode != 0 and limit is not None and self._ran_out_of_memory():
            return (
                f"the rule process exceeded its memory limit of {limit} MB "
                f"(it {describe_exit(returncode)})"
            )
        return f"the rule process {describe_exit(returncode)}"

    def _ran_out_of_memory(self) -> bool:
        tail = b""
        with contextlib.suppress(OSError), open(self.launch.log_path, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - _LOG_TAIL_BYTES))
            tail = log.read()
        text = tail.decode("utf-8", "replace")
        return any(sign in text for sign in _OUT_OF_MEMORY)

    def stop(self, grace_seconds: float) -> None:
        """SIGTERM (its rules end Stopped), then SIGKILL after ``grace_seconds``."""
        self.child.stop(grace_seconds)


class LocalRuleExecutor:
    """Runs rule evaluators as child processes under ``limits``, with ``environment``; ends one
    that makes no progress for ``progress_timeout_seconds``."""

    def __init__(
        self,
        *,
        limits: ChildLimits,
        environment: Mapping[str, str] | None = None,
        progress_timeout_seconds: float,
    ) -> None:
        self.limits = limits
        self.environment = environment
        self.progress_timeout_seconds = progress_timeout_seconds

    def start(self, launch: RuleLaunch) -> LocalRuleExecution:
        """Start ``launch`` as a child process; OSError when it cannot be started."""
        return LocalRuleExecution(
            launch,
            limits=self.limits,
            environment=self.environment,
            progress_timeout_seconds=self.progress_timeout_seconds,
        )

    def close(self) -> None:
        """Nothing to let go of: each child process ends with its execution."""
