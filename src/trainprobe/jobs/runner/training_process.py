"""The training as a child process: started, logged, stopped, and explained when it fails.

The training is a ``ChildProcess`` (its own process group: torchrun and all its workers, a
DataLoader's workers; bound to the runner's lifetime). Its standard output and error go, line by
line as they come, into one log file; the last lines of its error output are kept to say why it
failed. It stops the way every child does (``ChildProcess.stop``).
"""

from __future__ import annotations

import collections
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

from trainprobe.jobs.child_process import ChildProcess

__all__ = ["ERROR_TAIL_LINES", "TrainingProcess"]

ERROR_TAIL_LINES = 12


class TrainingProcess:
    """A started training: its child process, its log, and the tail of its error output."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        cwd: str,
        environment: Mapping[str, str],
        log_path: str,
    ) -> None:
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed when both pumps end)
        self._lock = threading.Lock()
        self._error_tail: collections.deque[str] = collections.deque(maxlen=ERROR_TAIL_LINES)
        try:
            self.child = ChildProcess(
                "training",
                command,
                cwd=cwd,
                environment=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except BaseException:
            self._log.close()
            raise
        self.pid = self.child.pid
        self.started = self.child.started
        process = self.child.process
        assert process.stdout is not None and process.stderr is not None
        self._pumps = [
            threading.Thread(target=self._pump, args=(process.stdout, False), daemon=True),
            threading.Thread(target=self._pump, args=(process.stderr, True), daemon=True),
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
        return self.child.poll()

    def stop(self, grace_seconds: float) -> int:
        """Stop the training (``ChildProcess.stop``); its exit status."""
        return self.child.stop(grace_seconds)

    def finish(self, timeout: float = 10.0) -> None:
        """After the main process ended: end what it left behind and close the log (after
        ``timeout`` seconds at most for the output still on its way)."""
        self.child.stop(0)
        deadline = time.monotonic() + timeout
        for pump in self._pumps:
            pump.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._log.close()

    def error_tail(self) -> list[str]:
        """The last lines the training wrote to its standard error."""
        with self._lock:
            return list(self._error_tail)
