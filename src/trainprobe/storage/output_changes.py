"""Telling cheaply whether a tensor output may have new steps, without listing every file.

A reader that follows a running job (the rule runner) would otherwise re-list every index file
at each poll, which costs more as the job saves more steps, once per rule. Adding a file by
rename changes its directory's modification time, so a few ``stat`` calls say whether anything
can have changed: the index directory, the newest two index sub-directories (workers may lag
across a thousand-step boundary), the collections directory and the end-of-training marker.

File times come from a coarse clock: two files added within one tick leave the same time. A
time younger than ``settle`` seconds is therefore never trusted, and every ``full_every``
seconds the answer is "changed" regardless, for file systems with looser semantics.

Object storage has no directory times: there the answer is always "changed", and the reader's
listing is what stays cheap (it lists only the keys after the last step it has seen).

Between polls, ``wait(timeout)`` sleeps until a file arrives where a step or the end of the
training appears (the output, its collections and index directories, the newest index
sub-directories), so a reader looks at a new step the moment it is written rather than up to a
poll interval later (``trainprobe.storage.output_arrivals``; a plain sleep where that cannot be
watched).
"""

from __future__ import annotations

import os
import time

from trainprobe.storage import files, locations
from trainprobe.storage.output_arrivals import DirectoryArrivals

__all__ = ["OutputChangeWatch"]


class OutputChangeWatch:
    """``changed()`` is False only when nothing can have been added since its last True."""

    def __init__(self, out_dir: str, *, settle: float = 0.05, full_every: float = 2.0) -> None:
        self.out_dir = out_dir
        self.settle = settle
        self.full_every = full_every
        self._index_dir = locations.join(out_dir, locations.INDEX_DIR)
        self._watched = [
            locations.join(out_dir, locations.COLLECTIONS_DIR),
            locations.join(out_dir, locations.TRAINING_END_FILE),
            self._index_dir,
        ]
        self._last: tuple[object, ...] | None = None
        self._index_time: object = None
        self._newest: list[str] = []
        self._last_full = 0.0
        self._arrivals = DirectoryArrivals() if not files.is_url(out_dir) else None

    def _mtime(self, path: str) -> int | None:
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return None

    def _signature(self) -> tuple[object, ...]:
        times: list[object] = [self._mtime(path) for path in self._watched]
        index_time = times[-1]
        # The index directory changes only when a thousand-step sub-directory is added (a
        # time within the settle window may hide a second addition: look again then).
        recent = isinstance(index_time, int) and time.time() - index_time / 1e9 < self.settle
        if index_time != self._index_time or index_time is None or recent:
            try:
                self._newest = sorted(os.listdir(self._index_dir))[-2:]
            except OSError:
                self._newest = []
            self._index_time = index_time
        for name in self._newest:
            times += [name, self._mtime(f"{self._index_dir}/{name}")]
        return tuple(times)

    def wait(self, timeout: float) -> bool:
        """Sleep until a file may have arrived in the output, or ``timeout`` seconds pass;
        whether the sleep ended early (then ``changed()`` is worth asking at once)."""
        arrivals = self._arrivals
        if arrivals is None:
            time.sleep(timeout)
            return False
        for directory in (self.out_dir, self._index_dir, self._watched[0]):
            arrivals.watch(directory)
        for name in self._newest:
            arrivals.watch(f"{self._index_dir}/{name}")
        return arrivals.wait(timeout)

    @property
    def wakes_on_arrival(self) -> bool:
        """Whether ``wait`` ends when a file arrives (else it sleeps its whole timeout)."""
        return self._arrivals is not None and self._arrivals.active

    def interrupt(self) -> None:
        """End the current (or next) ``wait`` at once (callable from another thread)."""
        if self._arrivals is not None:
            self._arrivals.interrupt()

    def close(self) -> None:
        """Stop watching for arrivals."""
        if self._arrivals is not None:
            self._arrivals.close()

    def changed(self) -> bool:
        """Whether the output may hold files not there at the previous True answer."""
        if files.is_url(self.out_dir):
            return True
        now = time.time()
        signature = self._signature()
        fresh = any(isinstance(item, int) and now - item / 1e9 < self.settle for item in signature)
        if fresh:
            # A file may still join this tick unseen: look again after the window.
            self._last = None
            return True
        if signature != self._last or now - self._last_full >= self.full_every:
            self._last = signature
            self._last_full = now
            return True
        return False
