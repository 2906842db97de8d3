"""The thread that writes the timeline, so the training thread only appends to a queue.

The training thread (and autograd's) call ``emit``, which appends one tuple to a deque; every
``flush_seconds`` the thread encodes what arrived into the trace file and lets the writer rotate a
file whose time is up. A write that fails stops the timeline (``error`` says why, ``on_error`` is
told once); the training never waits on this thread except in ``close``.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

from trainprobe.storage.trace_file import TimelineEvent, TraceFileWriter

__all__ = ["TraceThread"]

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.25


class TraceThread:
    """Writes emitted events through a ``TraceFileWriter`` on a thread of its own."""

    def __init__(
        self,
        writer: TraceFileWriter,
        on_error: Callable[[BaseException], None],
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        self.writer = writer
        self.error: BaseException | None = None
        self._on_error = on_error
        self._flush_seconds = flush_seconds
        self._events: collections.deque[TimelineEvent] = collections.deque()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="trainprobe-timeline", daemon=True)
        self._thread.start()

    def emit(self, event: TimelineEvent) -> None:
        """Queue one complete event."""
        self._events.append(event)

    def flush(self) -> None:
        """Write every event queued so far (from any thread; the writer is used under a lock)."""
        with self._lock:
            if self.error is not None:
                self._events.clear()
                return
            try:
                events = self._events
                while events:
                    self.writer.write(events.popleft())
                self.writer.rotate_if_due()
            except Exception as error:
                self.error = error
                self._events.clear()
                self._on_error(error)

    def configure(self, *, max_file_size: int, close_interval: float) -> None:
        """Rotate files by these limits from now on."""
        with self._lock:
            self.writer.configure(max_file_size=max_file_size, close_interval=close_interval)

    def finish_file(self) -> None:
        """Write what is queued and finish the open file (the timeline pauses)."""
        self.flush()
        with self._lock:
            if self.error is None:
                try:
                    self.writer.close()
                except Exception as error:
                    self.error = error
                    self._on_error(error)

    def close(self) -> None:
        """Write what is queued, finish the open file and stop the thread."""
        self._stop.set()
        self._thread.join()
        self.finish_file()

    def _run(self) -> None:
        while not self._stop.wait(self._flush_seconds):
            self.flush()
