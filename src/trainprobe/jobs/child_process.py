"""A job's child process: started in a group of its own, bound to its parent, stopped one way.

Every process a job runner starts (the training, the system monitor, each rule evaluator, the
profiler rules, the reports) is a ``ChildProcess``:

- it runs in a process group (and session) of its own, so one signal reaches every process it
  starts in turn (torchrun's workers, a DataLoader's workers), and Ctrl-C in the terminal that
  started the runner reaches only the runner;
- it is bound to the lifetime of the process that started it: on Linux the kernel sends it
  ``PARENT_DEATH_SIGNAL`` (SIGTERM, so it can close its files) when the starting thread ends
  (``PR_SET_PDEATHSIG``, set in the child before it runs its program; a parent already gone by
  then is noticed and the child ends at once). A process started by another program (torchrun
  starts each worker in a session of its own) binds itself with ``end_with_parent``.
  trainprobe's own child programs also watch their runner
  (``trainprobe.jobs.processes.runner_watch``), which covers the systems without it;
- ``ChildLimits`` (niceness, a memory limit, the cores it may use) are applied in the child,
  before its program runs, so they hold for everything it starts;
- it stops one way (``stop``): SIGTERM to the group, ``grace_seconds`` to end, then SIGKILL to the
  group; whatever is left of the group is killed too once the child has ended. Children that end
  together (a job's hosts) share one grace (``stop_together``);
- ``describe_exit`` says how it ended, in words.

Start children from a thread that lives as long as the parent (the runner's main thread): the
kernel sends the death signal when the thread that started the child ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

__all__ = [
    "PARENT_DEATH_SIGNAL",
    "ChildLimits",
    "ChildProcess",
    "describe_exit",
    "end_with_parent",
    "stop_together",
]

PARENT_DEATH_SIGNAL = signal.SIGTERM
_PR_SET_PDEATHSIG = 1
_MEGABYTE = 1024 * 1024


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    function: Callable[..., int] = libc.prctl
    return function


_prctl = _load_prctl()
"""Loaded once here, so the child calls it without loading anything between fork and exec."""


def describe_exit(returncode: int) -> str:
    """How a process ended, in words: ``exited with status 1``, ``was killed by signal 9
    (SIGKILL)``."""
    if returncode < 0:
        number = -returncode
        try:
            name = f" ({signal.Signals(number).name})"
        except ValueError:
            name = ""
        return f"was killed by signal {number}{name}"
    return f"exited with status {returncode}"


@dataclass(frozen=True)
class ChildLimits:
    """What a child may use, applied in the child before its program runs.

    ``niceness`` is added to its CPU scheduling niceness (higher runs less when the CPU is
    busy); ``memory_limit_mb`` caps its data segment and anonymous memory (``RLIMIT_DATA``: an
    allocation past it fails, in Python as MemoryError); ``cpus`` are the cores it may run on.
    """

    niceness: int = 0
    memory_limit_mb: int | None = None
    cpus: frozenset[int] | None = None

    def apply(self) -> None:
        """Apply the limits to the calling process (and so to what it starts)."""
        if self.niceness:
            os.nice(self.niceness)
        if self.memory_limit_mb is not None:
            limit = self.memory_limit_mb * _MEGABYTE
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        if self.cpus and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, self.cpus)


def _arm_parent_death_signal(parent_pid: int, if_already_gone: int) -> None:
    # Only system calls: this also runs in a child between fork and exec.
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0)
        if os.getppid() != parent_pid:
            # The parent ended before the death signal was armed.
            os.kill(os.getpid(), if_already_gone)


def _prepare_child(parent_pid: int, limits: ChildLimits | None) -> Callable[[], None]:
    """What the child runs between fork and exec. Only system calls: no import, no lock."""

    def prepare() -> None:
        _arm_parent_death_signal(parent_pid, int(signal.SIGKILL))
        if limits is not None:
            limits.apply()

    return prepare


def end_with_parent() -> None:
    """Bind this process to its parent's lifetime: ``PARENT_DEATH_SIGNAL`` when the parent
    ends (Linux; nothing elsewhere), at once if it already has.

    For a process that another program started outside the job's process groups: torchrun
    starts each worker in a session of its own, where the group signals that stop a host's
    torchrun do not reach it.
    """
    _arm_parent_death_signal(os.getppid(), int(PARENT_DEATH_SIGNAL))


class ChildProcess:
    """A started child (see the module docstring); ``name`` says what it is in messages.

    ``stdout`` and ``stderr`` are as for ``subprocess.Popen`` (a file, ``subprocess.PIPE``,
    ``subprocess.STDOUT``); ``log_path`` is a shorthand for both going to the end of that file.
    OSError when the program cannot be started.
    """

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        cwd: str,
        environment: Mapping[str, str] | None = None,
        log_path: str | None = None,
        stdout: int | IO[Any] | None = None,
        stderr: int | IO[Any] | None = None,
        limits: ChildLimits | None = None,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.limits = limits
        log = None
        if log_path is not None:
            os.makedirs(os.path.dirname(log_path), exist_ok=True)
            log = open(log_path, "ab")  # noqa: SIM115 (the child keeps its own copy)
            stdout, stderr = log, subprocess.STDOUT
        try:
            self.process = subprocess.Popen(
                self.command,
                cwd=cwd,
                env=dict(environment) if environment is not None else None,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=_prepare_child(os.getpid(), limits),
            )
        finally:
            if log is not None:
                log.close()
        self.pid = self.process.pid
        self.started = time.time()

    def __repr__(self) -> str:
        return f"<ChildProcess {self.name} pid={self.pid} returncode={self.poll()}>"

    def poll(self) -> int | None:
        """The exit status once the child has ended (negative: the signal that ended it)."""
        return self.process.poll()

    @property
    def running(self) -> bool:
        """Whether the child has not ended yet."""
        return self.poll() is None

    def ending(self) -> str | None:
        """How the child ended, in words (``describe_exit``); None while it runs."""
        returncode = self.poll()
        return None if returncode is None else describe_exit(returncode)

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to every process of the child's group that is left."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait ``timeout`` seconds at most (None: as long as it takes) for the child to end;
        its exit status, or None when it still runs."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_seconds: float) -> int:
        """End the child: SIGTERM to its group, ``grace_seconds`` to end, then SIGKILL; and
        SIGKILL to whatever is left of the group. Its exit status."""
        [returncode] = stop_together([self], grace_seconds)
        return returncode

    def kill(self) -> int:
        """SIGKILL to whatever is left of the child's group; its exit status."""
        if self.poll() is None:
            self.signal_group(signal.SIGKILL)
            self.process.wait()
        self.signal_group(signal.SIGKILL)
        returncode = self.process.poll()
        assert returncode is not None
        return returncode

    def finish(self, wait_seconds: float, grace_seconds: float) -> bool:
        """Let the child end on its own within ``wait_seconds``, else ``stop`` it; whether it
        ended on its own."""
        ended = self.wait(wait_seconds) is not None
        self.stop(grace_seconds)
        return ended


def stop_together(children: Sequence[ChildProcess], grace_seconds: float) -> list[int]:
    """End ``children`` at once (``ChildProcess.stop``, the grace shared): SIGTERM to each group
    still running, ``grace_seconds`` in all for them to end, then SIGKILL to what is left of
    each group. Their exit statuses, in order."""
    for child in children:
        if child.poll() is None:
            child.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    for child in children:
        child.wait(max(0.0, deadline - time.monotonic()))
    return [child.kill() for child in children]
