"""What the hook costs the training: its own time per step, its waits on the device, the bytes
it wrote.

The time is measured on the thread that called the hook (the training thread, or the autograd
thread that ran a gradient hook) around every hook entry; the writer thread's time is not in it,
since it runs beside the training. A step's time runs from the start of its forward to the start
of the next step's forward, so it includes finishing the step (handing its buffers over).

A wait for the device inside the hook (a CUDA event's ``synchronize()``, through
``wait_for_device``) is counted apart from that time: while the thread waits, the device runs the
training's own queued work, which a wall clock around the hook would count as the hook's.
``device_wait_seconds`` is what the calling thread has waited so far; the hook reads it around
each entry and subtracts the difference from the entry's time. A kernel launch that blocks
because the device's queue is full cannot be told apart, and stays in the hook's time.

``OverheadFile`` saves it as ``<out_dir>/hook-overhead/<worker>.json``
(``trainprobe.storage.hook_overhead``) for the report: the hook has it written on its writer
thread at most once a minute and once more at ``close()``; and at once when saving stops
(``saving_stopped``), so the job's runner can say where and why. So that this last write fits on
a disk that filled up, the hook keeps ``RESERVE_BYTES`` beside the file while it runs
(``<worker>.reserve``, which no reader lists) and frees them to write it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainprobe.storage.hook_overhead import (
    HOOK_OVERHEAD_DIR,
    HookOverheadRecord,
    encode_hook_overhead,
    hook_overhead_file,
    write_hook_overhead,
)
from trainprobe.storage.object_store import is_url

__all__ = [
    "RESERVE_BYTES",
    "HookOverhead",
    "OverheadFile",
    "device_wait_seconds",
    "wait_for_device",
]

log = logging.getLogger("trainprobe")

RESERVE_BYTES = 64 * 1024


class Synchronizable(Protocol):
    """What the hook waits for on a device: a ``torch.cuda.Event`` (or a stream)."""

    def synchronize(self) -> None: ...


class _Waited(threading.local):
    seconds = 0.0


_waited = _Waited()


def wait_for_device(event: Synchronizable) -> None:
    """Block until ``event`` has happened on its device, counting the wait as the calling
    thread's (``device_wait_seconds``), apart from the hook's own time."""
    started = time.perf_counter()
    try:
        event.synchronize()
    finally:
        _waited.seconds += time.perf_counter() - started


def device_wait_seconds() -> float:
    """How long the calling thread has waited for a device in ``wait_for_device`` so far."""
    return _waited.seconds


@dataclass
class HookOverhead:
    """The hook's seconds per global step, its device waits, and the bytes it has written so far.

    ``add`` and ``add_device_wait`` are called by the training thread; ``record`` may be called
    from another thread (the writer's) and sees every step added before it.
    """

    seconds_by_step: dict[int, float] = field(default_factory=dict)
    device_wait_by_step: dict[int, float] = field(default_factory=dict)
    """Seconds the hook waited for the device, by step; not part of ``seconds_by_step``."""
    _bytes: Callable[[], int] = field(default=lambda: 0, repr=False)
    blocked_seconds: Callable[[], float] = field(default=lambda: 0.0, repr=False)
    file_bytes: int = 0
    """Bytes of the overhead file's own writes (every version of it), part of ``bytes_written``."""
    stopped_step: int | None = None
    stopped_error: str | None = None
    """Where and why the hook stopped saving (``saving_stopped``); None while it saves."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, step: int, seconds: float) -> None:
        """Count ``seconds`` of hook time against ``step``."""
        with self._lock:
            self.seconds_by_step[step] = self.seconds_by_step.get(step, 0.0) + seconds

    def add_device_wait(self, step: int, seconds: float) -> None:
        """Count ``seconds`` spent waiting for the device against ``step``."""
        with self._lock:
            self.device_wait_by_step[step] = self.device_wait_by_step.get(step, 0.0) + seconds

    @property
    def total_seconds(self) -> float:
        """The hook's time over all steps."""
        return sum(self.seconds_by_step.values())

    @property
    def device_wait_seconds(self) -> float:
        """The hook's waits for the device over all steps."""
        return sum(self.device_wait_by_step.values())

    @property
    def steps(self) -> int:
        """How many steps the hook has seen."""
        return len(self.seconds_by_step)

    @property
    def mean_seconds_per_step(self) -> float:
        """The hook's average time per step (0 before the first step)."""
        return self.total_seconds / self.steps if self.steps else 0.0

    @property
    def bytes_written(self) -> int:
        """Bytes of every file the hook has written so far, its overhead file included."""
        return self._bytes() + self.file_bytes

    def record(self, worker: str) -> HookOverheadRecord:
        """A snapshot of the overhead so far, as ``worker``'s overhead file holds it."""
        with self._lock:
            by_step = dict(self.seconds_by_step)
            waits = dict(self.device_wait_by_step)
        steps = sorted(by_step)
        seconds = [by_step[step] for step in steps]
        total = sum(seconds)
        # A wait counted against a step the hook has not finished yet shows once it has.
        device_wait = [waits.get(step, 0.0) for step in steps]
        return HookOverheadRecord(
            worker=worker,
            steps=len(steps),
            total_seconds=total,
            mean_seconds_per_step=total / len(steps) if steps else 0.0,
            bytes_written=self.bytes_written,
            blocked_seconds=self.blocked_seconds(),
            step=steps,
            seconds=seconds,
            device_wait_seconds=sum(device_wait),
            device_wait=device_wait if any(device_wait) else [],
            stopped_step=self.stopped_step,
            stopped_error=self.stopped_error,
        )

    def saving_stopped(self, step: int | None, error: BaseException) -> None:
        """Record that saving stopped at ``step`` because of ``error``."""
        self.stopped_step = step
        strerror = getattr(error, "strerror", None)
        self.stopped_error = strerror if strerror else f"{type(error).__name__}: {error}"

    def to_dict(self) -> dict[str, Any]:
        """A summary fit for a report: totals plus the seconds of each step."""
        return {
            "steps": self.steps,
            "total_seconds": self.total_seconds,
            "mean_seconds_per_step": self.mean_seconds_per_step,
            "bytes_written": self.bytes_written,
            "blocked_seconds": self.blocked_seconds(),
            "device_wait_seconds": self.device_wait_seconds,
            "seconds_by_step": dict(self.seconds_by_step),
        }


class OverheadFile:
    """Writes a ``HookOverhead`` into ``out_dir``, replacing the previous version each time.

    Its bytes count in ``overhead.bytes_written``, and the file's own count includes it. A
    failure to write is logged once and turns the file off; nothing else stops.
    """

    def __init__(self, out_dir: str, overhead: HookOverhead) -> None:
        self.out_dir = out_dir
        self.overhead = overhead
        self.enabled = True
        self.reserved = False

    def _reserve_path(self, worker: str) -> str:
        return os.path.join(self.out_dir, HOOK_OVERHEAD_DIR, f"{worker}.reserve")

    def reserve(self, worker: str) -> None:
        """Hold ``RESERVE_BYTES`` of disk for the file's last write (see the module docstring);
        quietly nothing when they cannot be held, or when ``out_dir`` is an object store (no
        local disk fills up)."""
        if is_url(self.out_dir):
            return
        self.reserved = True
        path = self._reserve_path(worker)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as reserve:
                reserve.write(bytes(RESERVE_BYTES))
        except OSError:
            log.debug("trainprobe: no disk reserved for the overhead file", exc_info=True)
            with contextlib.suppress(OSError):
                os.remove(path)

    def release(self, worker: str) -> None:
        """Free the reserved disk."""
        with contextlib.suppress(OSError):
            os.remove(self._reserve_path(worker))

    def write(self, worker: str) -> None:
        """Write the overhead so far as ``worker``'s file (nothing once turned off).

        When the disk is full and saving has stopped, the reserve and the previous version are
        removed to make room, so that where and why saving stopped gets written."""
        if not self.enabled:
            return
        try:
            data = encode_hook_overhead(self.overhead.record(worker), count_itself=True)
            try:
                self.overhead.file_bytes += write_hook_overhead(self.out_dir, data, worker)
            except OSError as full:
                if full.errno != errno.ENOSPC or self.overhead.stopped_error is None:
                    raise
                self.release(worker)
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.out_dir, hook_overhead_file(worker)))
                self.overhead.file_bytes += write_hook_overhead(self.out_dir, data, worker)
        except Exception as error:
            self.enabled = False
            log.warning(
                "trainprobe: writing the hook's overhead file of %s under %s failed and stops "
                "for the rest of this run (%s: %s); the rest of the hook and the training go on",
                worker,
                self.out_dir,
                type(error).__name__,
                error,
            )
