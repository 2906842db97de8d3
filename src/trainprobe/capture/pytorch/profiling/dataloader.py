"""Data loader profiling: the DataLoader events smdebug's analysis and profiler rules read.

Three phases, named as the AWS PyTorch containers named them (reference/smdebug.md §5.1, §5.3)::

    DataLoaderIterInitialize  <iterator class>.__init__     a new iterator (an epoch starts)
    DataLoaderIter            <iterator class>::GetNext     the training waiting for a batch
    DataLoaderWorker          DataLoaderWorker::fetch       a worker process loading a batch

Each carries ``num_workers``, ``pin_memory``, ``prefetch_factor`` and ``pid`` (a worker's own
process id for DataLoaderWorker, so the Dataloader rule can count the loaders running in
parallel); DataLoaderIter also ``step_num``, DataLoaderWorker ``worker_id`` (each worker is a
track of its own). Initialisation events are written whenever the timeline runs (once per epoch);
the others only for steps that data loader profiling covers: a batch wait when its step is
covered, a worker's fetch when it overlaps a covered step (including the wait for its batch).
``MetricsRegex`` keeps the events whose name or phase it matches (``re.search``).
"""

from __future__ import annotations

import collections
import contextlib
import re
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trainprobe.capture.pytorch.profiling.dataloader_patch import WorkerChannel, WorkerRecord
from trainprobe.capture.pytorch.profiling.timeline import StepRecord, Wait
from trainprobe.storage.trace_file import TimelineEvent

__all__ = [
    "ITERATOR_GET_NEXT",
    "ITERATOR_INITIALIZE",
    "WORKER_FETCH",
    "DataloaderProfiling",
    "LoaderSettings",
]

ITERATOR_INITIALIZE = "DataLoaderIterInitialize"
ITERATOR_GET_NEXT = "DataLoaderIter"
WORKER_FETCH = "DataLoaderWorker"

_KEPT_INTERVALS = 64


@dataclass(frozen=True)
class LoaderSettings:
    """How a DataLoader iterator loads: what the events tell about it."""

    iterator: str
    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    batch_size: int | None
    persistent_workers: bool

    @classmethod
    def of(cls, loader: Any, iterator: Any) -> LoaderSettings:
        """The settings of ``loader``'s ``iterator``."""
        return cls(
            type(iterator).__name__,
            int(getattr(loader, "num_workers", 0)),
            bool(getattr(loader, "pin_memory", False)),
            getattr(loader, "prefetch_factor", None),
            getattr(loader, "batch_size", None),
            bool(getattr(loader, "persistent_workers", False)),
        )

    def args(self) -> dict[str, Any]:
        """The event arguments these settings give."""
        return {
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory,
            "prefetch_factor": self.prefetch_factor,
        }


class DataloaderProfiling:
    """Writes the data loader events of the steps it is told are profiled."""

    def __init__(self, emit: Callable[..., None], pid: int) -> None:
        self._emit = emit
        self._pid = pid
        self._regex = re.compile(".*")
        self._settings: weakref.WeakKeyDictionary[Any, LoaderSettings] = weakref.WeakKeyDictionary()
        self._channels: list[tuple[weakref.ref[Any], WorkerChannel, LoaderSettings]] = []
        self._covered: collections.deque[tuple[float, float]] = collections.deque(
            maxlen=_KEPT_INTERVALS
        )
        self._open: float | None = None

    def configure(self, metrics_regex: str) -> None:
        """Keep only the events whose name or phase ``metrics_regex`` matches."""
        self._regex = re.compile(metrics_regex)

    def _wanted(self, phase: str, name: str) -> bool:
        return bool(self._regex.search(name) or self._regex.search(phase))

    def iterator_created(
        self,
        loader: Any,
        iterator: Any,
        start_us: float,
        end_us: float,
        channel: WorkerChannel | None,
    ) -> None:
        """A new iterator: remember its settings and channel, and write its event."""
        settings = LoaderSettings.of(loader, iterator)
        with contextlib.suppress(TypeError):
            self._settings[iterator] = settings
        if channel is not None:
            self._channels.append((weakref.ref(iterator), channel, settings))
        workers = getattr(iterator, "_workers", None) or []
        args = {
            "pid": self._pid,
            **settings.args(),
            "batch_size": settings.batch_size,
            "persistent_workers": settings.persistent_workers,
            "worker_pids": [getattr(worker, "pid", None) for worker in workers],
        }
        name = f"{settings.iterator}.__init__"
        self._emit(TimelineEvent(ITERATOR_INITIALIZE, name, start_us, end_us - start_us, args))

    def settings_of(self, iterator: Any) -> LoaderSettings | None:
        """What is known of the loader of ``iterator`` (None for one started before)."""
        try:
            return self._settings.get(iterator)
        except TypeError:
            return None

    def steps_placed(self, placed: Iterable[tuple[Wait, StepRecord]]) -> None:
        """Write the batch waits of covered steps, and remember when those steps ran."""
        for wait, record in placed:
            if not record.dataloader:
                continue
            settings = wait.loader
            name = f"{wait.name}::GetNext"
            if self._wanted(ITERATOR_GET_NEXT, name):
                args = {"pid": self._pid, "step_num": record.args["step_num"]}
                if isinstance(settings, LoaderSettings):
                    args.update(settings.args())
                self._emit(
                    TimelineEvent(
                        ITERATOR_GET_NEXT, name, wait.start_us, wait.end_us - wait.start_us, args
                    )
                )

    def step_started(self, record: StepRecord) -> None:
        """A step starts; if covered, worker fetches from its first batch wait on are written."""
        self._open = None
        if record.dataloader:
            self._open = record.start_us if record.first_wait_us is None else record.first_wait_us

    def step_finished(self, record: StepRecord) -> None:
        """A step ended; if covered, worker fetches overlapping it will still be written."""
        if record.dataloader and record.end_us is not None:
            start = record.start_us if record.first_wait_us is None else record.first_wait_us
            self._covered.append((start, record.end_us))
        self._open = None

    @property
    def has_channels(self) -> bool:
        """Whether some iterator's workers report their fetches."""
        return bool(self._channels)

    def drain(self) -> None:
        """Write the worker fetches that arrived and overlap a covered step; forget the rest."""
        if not self._channels:
            return
        alive = []
        for reference, channel, settings in self._channels:
            if reference() is None:
                records = channel.close()
            else:
                records = channel.drain()
                alive.append((reference, channel, settings))
            self._write_workers(records, settings)
        self._channels = alive

    def close(self) -> None:
        """Tell every worker to stop sending and write what had arrived."""
        for _, channel, settings in self._channels:
            self._write_workers(channel.close(), settings)
        self._channels = []

    def _write_workers(self, records: list[WorkerRecord], settings: LoaderSettings) -> None:
        if not records or not self._wanted(WORKER_FETCH, f"{WORKER_FETCH}::fetch"):
            return
        covered = list(self._covered)
        if self._open is not None:
            covered.append((self._open, float("inf")))
        for worker_id, pid, start_us, end_us in records:
            if not any(start_us <= until and end_us >= since for since, until in covered):
                continue
            self._emit(
                TimelineEvent(
                    WORKER_FETCH,
                    f"{WORKER_FETCH}::fetch",
                    start_us,
                    end_us - start_us,
                    {"pid": pid, "worker_id": worker_id, **settings.args()},
                    worker_id,
                    f"worker {worker_id}",
                )
            )
