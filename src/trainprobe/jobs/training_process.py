"""The training as a process group: started, logged, stopped, and explained when it fails.

The training runs in a process group of its own (torchrun and all its workers, a DataLoader's
workers), so one signal reaches every process of it. Its standard output and error go, line by
line as they come, into one log file; the last lines of its error output are kept to say why it
failed. ``stop`` asks politely (SIGTERM to the group), then, after a grace period, ends it
(SIGKILL).
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

__all__ = ["ERROR_TAIL_LINES", "TrainingProcess", "describe_exit"]

ERROR_TAIL_LINES = 12


def describe_exit(returncode: int) -> str:
    """How a process ended, in words: its exit status or the signal that ended it."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was ended by {name}"
    return f"exited with status {returncode}"


class TrainingProcess:
    """A started training: its process group, its log, and the tail of its error output."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        cwd: str,
        environment: Mapping[str, str],
        log_path: str,
    ) -> None:
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        self.command = list(command)
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed when both pumps end)
        self._lock = threading.Lock()
        self._error_tail: collections.deque[str] = collections.deque(maxlen=ERROR_TAIL_LINES)
        self.process = subprocess.Popen(
            self.command,
            cwd=cwd,
            env=dict(environment),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.pid = self.process.pid
        self.started = time.time()
        assert self.process.stdout is not None and self.process.stderr is not None
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.process.stdout, False), daemon=True),
            threading.Thread(target=self._pump, args=(self.process.stderr, True), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    def _pump(self, stream: IO[bytes], is_error: bool) -> None:
        for line in iter(stream.readline, b""):
            with self._lock:
                if not self._log.closed:
                    self._log.write(line)
                    self._log.flush()
                if is_error and line.strip():
                    self._error_tail.append(line.decode("utf-8", "replace").rstrip())
        stream.close()

    def poll(self) -> int | None:
        """The exit status once the training's main process has ended, else None."""
        return self.process.poll()

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to every process of the training."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def stop(self, grace_seconds: float) -> int:
        """SIGTERM to the group, then SIGKILL after ``grace_seconds``; the exit status."""
        self.signal_group(signal.SIGTERM)
        try:
            return self.process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            return self.process.wait()

    def finish(self, timeout: float = 10.0) -> None:
        """After the main process ended: end what it left behind and close the log."""
        self.signal_group(signal.SIGKILL)
        for pump in self._pumps:
            pump.join(timeout)
        with self._lock:
            self._log.close()

    def error_tail(self) -> list[str]:
        """The last lines the training wrote to its standard error."""
        with self._lock:
            return list(self._error_tail)
