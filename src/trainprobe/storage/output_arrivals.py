"""Waking a reader as soon as a file arrives in a directory it watches, instead of at its next
poll: ``DirectoryArrivals.wait(timeout)``.

A reader following a live job (the rule runner) otherwise sleeps a whole poll interval after a
step is written before it looks: half an interval of detection latency on average, paid by every
rule. On Linux, inotify tells the moment a file is renamed into, created in or closed after
writing in one of the directories watched; ``wait`` returns then. Elsewhere, for object storage,
or when inotify cannot be had (no libc, the watch limit reached), ``wait`` sleeps the whole
timeout, as polling did: an arrival only ever shortens a sleep, so the reader's own checks stay
what decides whether anything changed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import select
import struct
import sys
import threading
import time

from trainprobe.storage.files import TEMP_SUFFIX

__all__ = ["DirectoryArrivals"]

log = logging.getLogger(__name__)

_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_ARRIVALS = _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc


class DirectoryArrivals:
    """Watches directories for arriving files (inotify where there is one; see the module)."""

    def __init__(self) -> None:
        self._libc = _libc()
        self._fd = -1
        self._watched: set[str] = set()
        self._lock = threading.Lock()
        self._wake_r = self._wake_w = -1
        if self._libc is not None:
            self._fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self._fd >= 0:
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(self._wake_w, False)

    @property
    def active(self) -> bool:
        """Whether arrivals wake ``wait`` (False: it sleeps the whole timeout)."""
        return self._fd >= 0

    def watch(self, directory: str) -> None:
        """Wake on files arriving in ``directory`` from now on (nothing if it does not exist
        yet; watch it again once it does)."""
        if self._fd < 0 or self._libc is None or directory in self._watched:
            return
        if self._libc.inotify_add_watch(self._fd, os.fsencode(directory), _ARRIVALS) >= 0:
            self._watched.add(directory)
            return
        error = ctypes.get_errno()
        if error == 28:  # ENOSPC: the user's inotify watches are used up; poll instead
            log.info("trainprobe: no inotify watch left, following %s by polling", directory)
            self.close()

    def interrupt(self) -> None:
        """End the current (or next) ``wait`` at once (callable from another thread)."""
        with self._lock, contextlib.suppress(OSError):
            if self._wake_w >= 0:
                os.write(self._wake_w, b"!")

    def wait(self, timeout: float) -> bool:
        """Sleep until a file arrives in a watched directory, ``interrupt()`` is called or
        ``timeout`` seconds pass; whether the sleep ended early. A writer's temporary file
        (``*.tmp``) is no arrival: its rename to the final name is."""
        deadline = time.monotonic() + timeout
        while self._fd >= 0:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                ready, _, _ = select.select([self._fd, self._wake_r], [], [], left)
            except (OSError, ValueError):
                break
            if not ready:
                return False
            if self._wake_r in ready:
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 4096)
                return True
            if any(not name.endswith(TEMP_SUFFIX) for name in self._names()):
                return True
        time.sleep(max(0.0, deadline - time.monotonic()))
        return False

    def _names(self) -> list[str]:
        """The names of the files the pending events are about."""
        data = b""
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(self._fd, 65536):
                data += chunk
        names, offset = [], 0
        while offset + _EVENT.size <= len(data):
            _, _, _, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size : offset + _EVENT.size + length]
            names.append(os.fsdecode(name.rstrip(b"\0")))
            offset += _EVENT.size + length
        return names

    def close(self) -> None:
        """Stop watching (``wait`` then sleeps its whole timeout)."""
        with self._lock:
            for descriptor in (self._fd, self._wake_r, self._wake_w):
                if descriptor >= 0:
                    with contextlib.suppress(OSError):
                        os.close(descriptor)
            self._fd = self._wake_r = self._wake_w = -1
            self._watched.clear()

    def __del__(self) -> None:
        self.close()
