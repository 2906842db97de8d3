"""Closing what a training left open when its interpreter exits.

A hook or profiler the script never closed still has steps to write when Python exits; it is
closed then, if it still exists (only a weak reference is kept, so registering keeps nothing
alive). A failure at that point is logged, never raised: the training has already ended.
"""

from __future__ import annotations

import atexit
import logging
import weakref
from collections.abc import Callable
from typing import TypeVar

__all__ = ["close_at_exit"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def close_at_exit(owner: T, close: Callable[[T], object], what: str) -> None:
    """Run ``close(owner)`` when the interpreter exits, if ``owner`` still exists then;
    ``what`` names it in the log."""
    reference = weakref.ref(owner)

    def at_exit() -> None:
        alive = reference()
        if alive is not None:
            try:
                close(alive)
            except Exception:
                log.debug("trainprobe: closing %s at exit failed", what, exc_info=True)

    atexit.register(at_exit)
