"""Timing ``torch.utils.data.DataLoader``: batches in this process and, when asked, in its workers.

While at least one listener is registered, two methods of torch are wrapped (and put back when
the last listener leaves):

- ``_BaseDataLoaderIter.__next__``: how long the training waited for each batch (every
  DataLoader iterator's ``next``, single- and multi-process);
- ``DataLoader._get_iterator``: each new iterator (once per epoch, or once for persistent
  workers), with how long it took to start.

Worker timings: when a listener asks for them and the loader has worker processes, the loader's
``worker_init_fn`` is wrapped, for the iterator being created only, by a picklable ``WorkerInit``
that, inside each worker, times every batch the worker fetches (``fetcher.fetch``, dataset reads
and collation) and sends ``(worker_id, pid, start_us, end_us)`` back through a queue of the
loader's multiprocessing context (so fork, spawn and forkserver work alike), then runs the user's
``worker_init_fn``. The batches themselves are not touched. Workers stop sending once the channel
is closed; the main process drains the queue.

A failure here never reaches the training: the wrappers fall back to torch's own behaviour.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import time
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch.utils.data import dataloader as torch_dataloader

__all__ = ["LoaderListener", "WorkerChannel", "WorkerInit", "add_listener", "remove_listener"]

log = logging.getLogger(__name__)

WorkerRecord = tuple[int, int, float, float]
"""A batch a worker fetched: (worker id, worker pid, start, end), microseconds since the epoch."""


class LoaderListener(Protocol):
    """What the wrappers tell; implementations must not raise."""

    @property
    def wants_worker_timings(self) -> bool: ...

    def batch_fetched(self, iterator: Any, start_us: float, end_us: float) -> None: ...

    def iterator_created(
        self,
        loader: Any,
        iterator: Any,
        start_us: float,
        end_us: float,
        channel: WorkerChannel | None,
    ) -> None: ...


class WorkerChannel:
    """The queue a DataLoader iterator's workers send their batch timings through."""

    def __init__(self, loader: Any) -> None:
        context = loader.multiprocessing_context or torch.multiprocessing
        self._queue: Any = context.Queue()
        self._sending: Any = context.Event()
        self._sending.set()
        self.closed = False

    def worker_init(self, user_init: Callable[[int], None] | None) -> WorkerInit:
        """The ``worker_init_fn`` that times fetches, then calls ``user_init``."""
        return WorkerInit(self._queue, self._sending, user_init)

    def drain(self) -> list[WorkerRecord]:
        """Every record that has arrived so far."""
        found: list[WorkerRecord] = []
        if self.closed:
            return found
        while True:
            try:
                found.append(self._queue.get_nowait())
            except (queue.Empty, OSError, EOFError, ValueError):
                return found

    def close(self) -> list[WorkerRecord]:
        """Tell the workers to stop sending; returns what had arrived."""
        if self.closed:
            return []
        self._sending.clear()
        found = self.drain()
        self.closed = True
        with contextlib.suppress(Exception):
            self._queue.close()
        return found


class WorkerInit:
    """A DataLoader ``worker_init_fn`` that times the worker's fetches (picklable for spawn)."""

    def __init__(self, records: Any, sending: Any, user_init: Callable[[int], None] | None) -> None:
        self.records = records
        self.sending = sending
        self.user_init = user_init

    def __call__(self, worker_id: int) -> None:
        try:
            _time_fetches(self.records, self.sending, worker_id)
        except Exception:  # never stop a worker over its timing
            log.debug("trainprobe: cannot time DataLoader worker %d", worker_id, exc_info=True)
        if self.user_init is not None:
            self.user_init(worker_id)


def _time_fetches(records: Any, sending: Any, worker_id: int) -> None:
    """In a worker process: make every fetcher created from now on report its fetch times."""
    records.cancel_join_thread()  # a worker must be able to exit with records unsent
    kind: Any = torch_dataloader._DatasetKind
    create = kind.create_fetcher
    pid = os.getpid()

    def create_fetcher(*args: Any, **kwargs: Any) -> Any:
        fetcher = create(*args, **kwargs)
        fetch = fetcher.fetch

        def timed_fetch(index: Any) -> Any:
            start = time.time()
            data = fetch(index)
            end = time.time()
            try:
                if sending.is_set():
                    records.put_nowait((worker_id, pid, start * 1e6, end * 1e6))
            except Exception:
                pass
            return data

        fetcher.fetch = timed_fetch
        return fetcher

    kind.create_fetcher = staticmethod(create_fetcher)


_listeners: list[LoaderListener] = []
_originals: dict[str, Any] = {}


def add_listener(listener: LoaderListener) -> None:
    """Start telling ``listener`` about DataLoader batches (wraps torch on the first one)."""
    if not _listeners:
        _install()
    _listeners.append(listener)


def remove_listener(listener: LoaderListener) -> None:
    """Stop telling ``listener``; torch gets its methods back when no listener is left."""
    with contextlib.suppress(ValueError):
        _listeners.remove(listener)
    if not _listeners:
        _uninstall()


def _install() -> None:
    iterator_class = torch_dataloader._BaseDataLoaderIter
    loader_class = torch_dataloader.DataLoader
    _originals["next"] = iterator_class.__next__
    _originals["get_iterator"] = loader_class._get_iterator
    original_next = iterator_class.__next__
    original_get_iterator = loader_class._get_iterator

    def timed_next(self: Any) -> Any:
        start = time.time()
        data = original_next(self)
        end = time.time()
        try:
            for listener in tuple(_listeners):
                listener.batch_fetched(self, start * 1e6, end * 1e6)
        except Exception:
            log.debug("trainprobe: a DataLoader listener failed", exc_info=True)
        return data

    def timed_get_iterator(self: Any) -> Any:
        listeners = tuple(_listeners)
        channel = None
        user_init = None
        try:
            if self.num_workers > 0 and any(item.wants_worker_timings for item in listeners):
                channel = WorkerChannel(self)
                user_init = self.worker_init_fn
                self.worker_init_fn = channel.worker_init(user_init)
        except Exception:
            log.debug("trainprobe: cannot time DataLoader workers", exc_info=True)
            channel = None
        start = time.time()
        try:
            iterator = original_get_iterator(self)
        finally:
            if channel is not None:
                self.worker_init_fn = user_init
        end = time.time()
        try:
            for listener in listeners:
                listener.iterator_created(self, iterator, start * 1e6, end * 1e6, channel)
        except Exception:
            log.debug("trainprobe: a DataLoader listener failed", exc_info=True)
        return iterator

    iterator_class.__next__ = timed_next  # type: ignore[method-assign]
    loader_class._get_iterator = timed_get_iterator  # type: ignore[method-assign]


def _uninstall() -> None:
    if not _originals:
        return
    torch_dataloader._BaseDataLoaderIter.__next__ = _originals.pop("next")  # type: ignore[method-assign]
    torch_dataloader.DataLoader._get_iterator = _originals.pop("get_iterator")  # type: ignore[method-assign]
