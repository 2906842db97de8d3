"""The hang watch: a thread that writes where every thread of the training is, once it is stuck.

It wakes every ``interval`` seconds, off the training thread, and writes the Python stacks of all
the process's threads (``trainprobe.storage.training_stacks``) when a rule asks for them (a
``stacks_request.json`` newer than the watch) or when the step in progress has run longer than
``step_limit`` seconds (once per step). The step in progress comes from ``progress()``: the step
and when it started (microseconds since the epoch), as the flight recorder last saw it. The
training thread pays nothing for it.

A thread that holds the GIL without end (a hang inside a C extension that never releases it)
stops this thread too: such a hang is not diagnosed. A failure of the watch is logged once and
ends it; the training goes on.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable

from trainprobe.storage.training_stacks import (
    Frame,
    ProcessStacks,
    ThreadStack,
    stacks_requested_at,
    write_stacks,
)

__all__ = ["StackWatch", "current_stacks"]

log = logging.getLogger(__name__)

Progress = Callable[[], "tuple[int, float] | None"]


def current_stacks(skip: int | None = None) -> list[ThreadStack]:
    """The stack of every thread of this process but the one with ident ``skip``."""
    threads = {thread.ident: thread for thread in threading.enumerate()}
    main = threading.main_thread().ident
    found = []
    for ident, frame in sys._current_frames().items():
        if ident == skip:
            continue
        thread = threads.get(ident)
        frames = [
            Frame(entry.filename, entry.lineno or 0, entry.name)
            for entry in traceback.extract_stack(frame)
        ]
        name = "the main thread" if ident == main else f"thread {thread.name if thread else ident}"
        found.append(ThreadStack(name, ident == main, frames))
    return found


class StackWatch:
    """Writes the process's stacks when asked or when a step runs too long (module docstring)."""

    def __init__(
        self,
        profiler_output: str,
        node_id: str,
        progress: Progress,
        *,
        step_limit: float | None,
        interval: float = 1.0,
    ) -> None:
        self.profiler_output = profiler_output
        self.node_id = node_id
        self.step_limit = step_limit or None
        self.interval = interval
        self.written: list[ProcessStacks] = []
        self._progress = progress
        self._since = time.time()
        self._answered: float | None = None
        self._stuck_step: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainprobe-hang-watch", daemon=True)

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def close(self) -> None:
        """Stop watching (the thread ends within one interval; this does not wait for it)."""
        self._stop.set()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                self._look()
        except Exception as error:
            log.warning(
                "trainprobe: the hang watch stops (%s: %s); the training goes on",
                type(error).__name__,
                error,
            )

    def _look(self) -> None:
        asked = stacks_requested_at(self.profiler_output)
        if asked is not None and asked >= self._since and asked != self._answered:
            self._answered = asked
            self.write("a rule found that the training makes no progress")
            return
        progress = self._progress()
        if self.step_limit is None or progress is None:
            return
        step, start_us = progress
        running = time.time() - start_us / 1e6
        if running > self.step_limit and step != self._stuck_step:
            self._stuck_step = step
            self.write(f"step {step} has run for {running:.0f} s, over {self.step_limit:g} s")

    def write(self, reason: str) -> ProcessStacks:
        """Write the stacks of every thread of the process now, saying ``reason``."""
        progress = self._progress()
        now = time.time()
        stacks = ProcessStacks(
            node=self.node_id,
            pid=os.getpid(),
            time=now,
            step=None if progress is None else progress[0],
            seconds_in_step=None if progress is None else now - progress[1] / 1e6,
            reason=reason,
            threads=current_stacks(skip=threading.get_ident()),
        )
        write_stacks(self.profiler_output, stacks)
        self.written.append(stacks)
        log.warning("trainprobe: %s; %s", reason, stacks.where())
        return stacks
