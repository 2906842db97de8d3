"""Whether a job's hook stopped saving, as its runner follows the job.

The hook writes where and why it stopped saving (a full disk: ``Debugger stopped saving at step
41: No space left on device``) into its overhead file (``trainprobe.storage.hook_overhead``).
``SavingWatch.check`` reads those files again only when one of them changed, and at most every
``CHECK_SECONDS``, and returns the message once when it is new, for the job's description. On
object storage, where a change costs a listing to see, it reads them at each check.
"""

from __future__ import annotations

import os
import time

from trainprobe.storage import files
from trainprobe.storage.hook_overhead import (
    HOOK_OVERHEAD_DIR,
    read_hook_overhead,
    saving_stopped_message,
)

__all__ = ["CHECK_SECONDS", "SavingWatch"]

CHECK_SECONDS = 1.0


class SavingWatch:
    """Watches the hook overhead files under ``debug_output``; ``message`` is the latest news."""

    def __init__(self, debug_output: str) -> None:
        self.debug_output = debug_output
        self.message: str | None = None
        self._stamp: tuple[tuple[str, int, int], ...] = ()
        self._checked = float("-inf")

    def check(self, *, now: bool = False) -> str | None:
        """The message when the hook has newly stopped saving, else None; ``now`` looks even if
        it looked less than ``CHECK_SECONDS`` ago."""
        moment = time.monotonic()
        if not now and moment - self._checked < CHECK_SECONDS:
            return None
        self._checked = moment
        stamp = files.listing_stamp(os.path.join(self.debug_output, HOOK_OVERHEAD_DIR))
        if stamp is not None and stamp == self._stamp:
            return None
        self._stamp = stamp or ()
        try:
            message = saving_stopped_message(read_hook_overhead(self.debug_output))
        except OSError:  # storage out of reach for now: the next check tries again
            return None
        if message is None or message == self.message:
            return None
        self.message = message
        return message
