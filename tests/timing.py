"""Waiting for what a test started, and a clock a test moves by hand."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], object],
    what: str | Callable[[], str],
    timeout: float = 120.0,
    interval: float = 0.05,
) -> None:
    """Wait for ``condition`` to hold; AssertionError naming ``what`` (or what it returns, said
    when giving up) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what if isinstance(what, str) else what()}")
        time.sleep(interval)


class FakeClock:
    """A clock (a callable returning seconds) that only moves when the test sets ``now``."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
