"""Signals a job's processes act on, handled in a thread rather than in the signal handler.

Python runs a signal handler in the main thread, between two of its bytecodes: possibly while
that thread holds a lock (writing a rule's status, inside ``Event.wait``). A handler that takes
the same lock (``Event.set``, a rule's ``stop``) then waits for itself forever, and the process
never ends. ``relay_signals`` installs handlers that only write the signal's number to a pipe
(no lock, no allocation to speak of); a daemon thread reads it and calls the real handler, which
may then take any lock the main thread holds: it waits until the main thread lets go.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType

__all__ = ["relay_signals"]


def relay_signals(signals: Iterable[int], handler: Callable[[int], None]) -> None:
    """From now on, call ``handler(signum)`` in a daemon thread for each of ``signals`` this
    process receives. Call from the main thread (signal handlers are installed there)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def relay(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # a full pipe: signals are already waiting
            os.write(write_end, bytes([signum]))

    def serve() -> None:
        while data := os.read(read_end, 1):
            handler(data[0])

    threading.Thread(target=serve, name="trainprobe-signals", daemon=True).start()
    for signum in signals:
        signal.signal(signum, relay)
