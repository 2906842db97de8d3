"""Where the Keras hook's files go: its writer thread, and the files beside the tensors.

One ``HookOutput`` per hook owns the ``WriterThread`` (made at the first file to write) and hands
it everything that is written: tensors, the collections file, the overhead file (at most once a
minute, and at the end), the first non-finite update's record, the spikes of the in-training
rules, and ``training_job_end.ts`` at ``close``. Nothing is written on the training's thread; the
stop request of an in-training rule is the one exception, written at once (after the spikes it
explains) because the job's runner acts on it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from trainprobe.capture.overhead import HookOverhead, OverheadFile
from trainprobe.capture.tensorboard_export import TensorBoardExport
from trainprobe.capture.writer_thread import CollectionsJob, SideJob, WriterThread
from trainprobe.storage.nonfinite_file import NonFiniteOrigin, write_nonfinite_origin
from trainprobe.storage.spike_records import SpikeRecord, write_spikes
from trainprobe.storage.stop_request import StopRequest, write_stop_request

__all__ = ["OVERHEAD_WRITE_SECONDS", "WORKER", "HookOutput"]

log = logging.getLogger("trainprobe")

OVERHEAD_WRITE_SECONDS = 60.0
WORKER = "worker_0"
"""The worker name of a Keras process (one Keras process writes)."""


class HookOutput:
    """The hook's writer and side files (see the module docstring)."""

    def __init__(
        self,
        out_dir: str,
        tensorboard_dir: str | None,
        collections: Callable[[], Mapping[str, Mapping[str, Any]]],
        on_error: Callable[[BaseException], None],
    ) -> None:
        """``collections`` gives the collections file's content when it is written."""
        self.out_dir = out_dir
        self._collections = collections
        self.worker = WORKER
        self.tensorboard_dir = tensorboard_dir
        self._on_error = on_error
        self._writer: WriterThread | None = None
        self._collections_written = False
        self.overhead = HookOverhead(_bytes=self._bytes_written, blocked_seconds=self._blocked)
        self._overhead_file = OverheadFile(out_dir, self.overhead)
        self._overhead_due_at = time.monotonic() + OVERHEAD_WRITE_SECONDS

    @property
    def writer(self) -> WriterThread:
        """The writer thread, started at the first use."""
        if self._writer is None:
            export = TensorBoardExport(self.tensorboard_dir) if self.tensorboard_dir else None
            self._writer = WriterThread(
                self.out_dir, self.worker, on_error=self._on_error, tensorboard=export
            )
        return self._writer

    @property
    def started(self) -> bool:
        """Whether anything was handed to the writer yet."""
        return self._writer is not None

    def step_written(self) -> None:
        """A step went to the writer: the collections file follows the first one."""
        if not self._collections_written:
            self._collections_written = True
            self._write_collections()

    def _write_collections(self) -> None:
        self.writer.submit(CollectionsJob(self._collections(), 1))

    def account(self, step: int, seconds: float) -> None:
        """Count ``seconds`` of the hook's time at ``step``; write the overhead file if due."""
        self.overhead.add(step, seconds)
        if not self._overhead_file.reserved:
            self._overhead_file.reserved = True
            reserve = functools.partial(self._overhead_file.reserve, self.worker)
            self.writer.submit(SideJob(reserve))
        now = time.monotonic()
        if now < self._overhead_due_at or not self._overhead_file.enabled:
            return
        self._overhead_due_at = now + OVERHEAD_WRITE_SECONDS
        self.writer.submit(SideJob(functools.partial(self._overhead_file.write, self.worker)))

    def write_origin(self, origin: NonFiniteOrigin) -> None:
        """Have the first non-finite update's record written."""
        out_dir, worker = self.out_dir, self.worker

        def write() -> None:
            self.overhead.file_bytes += write_nonfinite_origin(out_dir, worker, origin)

        self.writer.submit(SideJob(write))

    def write_spikes(
        self, records: list[SpikeRecord], judged: dict[str, dict[str, int]], rules: dict[str, str]
    ) -> None:
        """Have the spikes file rewritten with these records and counts."""
        out_dir, worker = self.out_dir, self.worker

        def write() -> None:
            self.overhead.file_bytes += write_spikes(out_dir, worker, records, judged, rules)

        self.writer.submit(SideJob(write))

    def write_stop(self, request: StopRequest) -> None:
        """Write a stop request now, after what is queued (the spikes that explain it)."""
        try:
            self.writer.flush()
            write_stop_request(self.out_dir, request)
        except OSError as error:
            log.warning("trainprobe: the stop request could not be written: %s", error)

    def saving_stopped(self, step: int, error: BaseException) -> None:
        """Saving failed at ``step``: the overhead file says so (if anything was written)."""
        if self._writer is not None:
            self.overhead.saving_stopped(step, error)

    def flush(self) -> None:
        """Wait until what is queued is written."""
        if self._writer is not None:
            self._writer.flush()

    def close(self, step: int, seconds: float) -> None:
        """Write the collections file, ``training_job_end.ts`` and the overhead; stop the
        writer."""
        self.overhead.add(step, seconds)
        writer = self.writer
        self._write_collections()
        writer.write_training_end()
        writer.close()
        self._overhead_file.write(self.worker)

    @property
    def error(self) -> BaseException | None:
        """The writer's first failure, if any."""
        return self._writer.error if self._writer is not None else None

    def _bytes_written(self) -> int:
        return self._writer.bytes_written if self._writer is not None else 0

    def _blocked(self) -> float:
        return self._writer.blocked_seconds if self._writer is not None else 0.0
