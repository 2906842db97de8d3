"""The background writer: one thread that turns captured tensors into step files.

The training thread only hands over buffers (``submit``); encoding, file I/O and waiting for
device-to-host copies happen here. The queue between the two is bounded both in items and in
bytes: when the disk cannot keep up, ``submit`` blocks (back-pressure) instead of letting
memory grow without limit. A single buffer larger than the byte bound is still accepted when the
queue is empty, so a large tensor never deadlocks.

A failure while writing (disk full, an unwritable directory, a tensor that cannot be encoded)
stops the writer: the step being written is discarded (its temporary file removed, so nothing
already written is damaged), ``error`` and ``failed_step`` (the step whose saving failed) are
set, ``on_error`` is called once, and everything
submitted afterwards is dropped without blocking, except the collections file and the end marker,
which are still written so that the steps already on disk stay readable.

With a ``TensorBoardExport`` the same thread also turns the records that carry a ``summary`` (and
the scalar batches marked ``export``) into TensorBoard scalars and histograms, flushes them when a
step ends and closes them with the writer. The export handles its own failures: it logs once and
turns itself off, and the step files go on.

The same thread keeps the scalars it writes as chunks beside the step files
(``storage.written_scalars``), so that a reader draws a long job's curves without decoding
every step's files; and, in the same chunks, the training record the hook hands it
(``RecordedSteps``: every TRAIN step's loss, learning rate and gradient norm,
``storage.training_record``), waiting for the values still arriving from a device, and exporting
them to TensorBoard where the export is on.

A ``SideJob`` runs another part's small file write (the hook's overhead file) on this thread, in
order with the rest, so that it never costs the training thread; it handles its own failures.

The writer works as a small pipeline, so that a step's device-to-host copies and checksums
overlap the writes of the records before them: a look-ahead thread takes the queued records in
order, waits for each one's content that is still arriving from a device (``PendingArray``), and
encodes and checksums each large one (``AHEAD_MIN_BYTES`` and up); the writing thread, a record or
more behind, finds them ready and only writes. The look-ahead never runs past the queue, so the
memory in flight stays within the queue's bounds; small records already in host memory (a CPU
training's many small tensors) skip it, and cost no hand-over between threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from trainprobe.capture.tensorboard_export import Summary, TensorBoardExport
from trainprobe.storage.collections_file import encode_collections
from trainprobe.storage.index_file import ShardEntry
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import (
    EncodedTensor,
    StepWriter,
    encode_tensor,
    write_collections_file,
    write_training_end,
)
from trainprobe.storage.training_record import CHARTED, RECORDED
from trainprobe.storage.written_scalars import ScalarChunkWriter

__all__ = [
    "AHEAD_MIN_BYTES",
    "CollectionsJob",
    "EndStep",
    "PendingArray",
    "RecordedStep",
    "RecordedSteps",
    "ScalarBatch",
    "ShapeRecord",
    "SideJob",
    "TensorRecord",
    "WriterThread",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_ITEMS = 4096
AHEAD_MIN_BYTES = 1 << 20
"""A record at least this large is encoded and checksummed by the look-ahead thread, while the
records before it are written."""


class PendingArray(Protocol):
    """A buffer whose content may still be arriving (an asynchronous device-to-host copy).

    It may also have a ``release()`` method, called once its content is written, after which
    its buffer may be reused, and an ``arriving`` attribute, False when its content is in host
    memory already (then a small one is not handed to the look-ahead thread).
    """

    nbytes: int

    def result(self) -> np.ndarray:
        """Wait until the content is there, and return it as a numpy array."""
        ...


Value = np.ndarray | PendingArray


def _resolve(value: Value) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else value.result()


def _release(value: Value) -> None:
    # A pending array may lend its buffer for reuse once its content is on disk.
    release = getattr(value, "release", None)
    if release is not None:
        release()


@dataclass
class TensorRecord:
    """One tensor to write into the file of global step ``step``.

    ``summary`` says what the TensorBoard export gets of it (None: nothing); ``save_raw`` False
    means the value travels only for its histogram and is not written to the step file.
    ``shard`` places the value, one worker's piece of a sharded tensor, in the full tensor.
    """

    step: int
    name: str
    value: Value
    mode: ModeKeys
    mode_step: int
    wall_time: float
    original_dtype: str | None = None
    summary: Summary | None = None
    save_raw: bool = True
    shard: ShardEntry | None = None


@dataclass
class ScalarBatch:
    """Several scalars computed together on the device, arriving as one buffer.

    ``names[i]`` is written with value ``values[i]`` as a 0-d array of ``dtypes[i]``, the whole
    batch in one write (``StepWriter.add_scalars``); with ``export`` each also becomes a
    TensorBoard scalar tagged ``names[i]``. ``shards`` place the pieces of sharded tensors that
    some of them (fingerprints) were taken of.
    """

    step: int
    names: Sequence[str]
    dtypes: Sequence[str]
    values: Value
    mode: ModeKeys
    mode_step: int
    wall_time: float
    export: bool = False
    shards: Sequence[ShardEntry] = ()


@dataclass
class RecordedStep:
    """One TRAIN step's record: ``values`` holds its loss and gradient norm (NaN where not
    known; they may still be arriving from a device), then, for a rate held on the device, its
    learning rate; else ``learning_rate`` is the rate it applied."""

    step: int
    mode: ModeKeys
    mode_step: int
    values: Value
    learning_rate: float
    wall_time: float


@dataclass
class RecordedSteps:
    """Recorded steps, each ended, handed over after the files of every step up to it."""

    steps: list[RecordedStep]


@dataclass
class ShapeRecord:
    """A tensor's shape, recorded in the step's index without its values."""

    step: int
    name: str
    shape: tuple[int, ...]
    mode: ModeKeys
    mode_step: int


@dataclass
class EndStep:
    """Close the file of ``step``: after this its index file is on disk."""

    step: int


@dataclass
class CollectionsJob:
    """Write (or rewrite) this worker's collections file."""

    collections: Mapping[str, Mapping[str, Any]]
    num_workers: int


@dataclass
class SideJob:
    """Run ``run`` on the writer thread after everything queued before it.

    It is still run after a failure of the step files; if it raises, that is logged and the
    writer goes on.
    """

    run: Callable[[], None]


@dataclass
class _TrainingEnd:
    pass


@dataclass
class _Flush:
    done: threading.Event


@dataclass
class _Stop:
    pass


Message = (
    TensorRecord
    | ScalarBatch
    | RecordedSteps
    | ShapeRecord
    | EndStep
    | CollectionsJob
    | SideJob
    | _TrainingEnd
    | _Flush
    | _Stop
)


def _kept_after_failure(message: Message) -> bool:
    return isinstance(message, (CollectionsJob, SideJob, _TrainingEnd))


def _size(message: Message) -> int:
    if isinstance(message, TensorRecord):
        return int(message.value.nbytes)
    if isinstance(message, ScalarBatch):
        return int(message.values.nbytes)
    return 0


class _Ahead:
    """A record prepared by the look-ahead thread: its content waited for, and, for a large
    tensor saved raw, its record encoded and checksummed (see the module docstring)."""

    __slots__ = ("array", "done", "encoded", "error", "message")

    def __init__(self, message: TensorRecord | ScalarBatch) -> None:
        self.message = message
        self.done = threading.Event()
        self.array: np.ndarray | None = None
        self.encoded: EncodedTensor | None = None
        self.error: BaseException | None = None

    def prepare(self) -> None:
        """Wait for the content and encode it (on the look-ahead thread); a failure is kept
        for the writing thread, which meets it at this record's turn."""
        message = self.message
        try:
            if isinstance(message, ScalarBatch):
                self.array = _resolve(message.values)
                return
            array = self.array = _resolve(message.value)
            if message.save_raw and array.ndim > 0 and array.nbytes >= AHEAD_MIN_BYTES:
                self.encoded = encode_tensor(
                    message.name,
                    array,
                    step=message.step,
                    mode=message.mode,
                    mode_step=message.mode_step,
                    wall_time=message.wall_time,
                    original_dtype=message.original_dtype,
                )
        except BaseException as error:
            self.error = error
        finally:
            self.done.set()

    def result(self) -> tuple[np.ndarray, EncodedTensor | None]:
        """The content and the encoded record (None: encode it now), once prepared."""
        self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.array is not None
        return self.array, self.encoded


def _ahead_of(message: Message) -> _Ahead | None:
    """The look-ahead thread's part in ``message``: content still arriving from a device, or
    a large record; None for what is quicker done in turn."""
    if isinstance(message, TensorRecord):
        value: Value = message.value
    elif isinstance(message, ScalarBatch):
        value = message.values
    else:
        return None
    if isinstance(value, np.ndarray):
        large = isinstance(message, TensorRecord) and message.save_raw
        return _Ahead(message) if large and value.nbytes >= AHEAD_MIN_BYTES else None
    if getattr(value, "arriving", True) or value.nbytes >= AHEAD_MIN_BYTES:
        return _Ahead(message)
    return None


@dataclass
class _Queued:
    message: Message
    size: int
    ahead: _Ahead | None = None


class WriterThread:
    """Writes what the hook captures into ``out_dir`` as ``worker``'s step files, on one thread.

    ``bytes_written`` counts the bytes of every file written so far, TensorBoard's included.
    ``error`` holds the first failure, after which nothing more is written. ``tensorboard``, when
    given, is owned by this thread from then on.
    """

    def __init__(
        self,
        out_dir: str,
        worker: str,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_items: int = DEFAULT_MAX_ITEMS,
        on_error: Callable[[BaseException], None] | None = None,
        tensorboard: TensorBoardExport | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.tensorboard = tensorboard
        self._tensorboard_bytes = 0
        self.worker = worker
        self.max_bytes = max_bytes
        self.max_items = max_items
        self.on_error = on_error
        self.error: BaseException | None = None
        self.failed_step: int | None = None
        self.bytes_written = 0
        self.steps_written = 0
        self.blocked_seconds = 0.0
        self._queue: deque[_Queued] = deque()
        self._to_prepare: deque[_Ahead] = deque()
        self._pending_bytes = 0
        self._condition = threading.Condition()
        self._writer: StepWriter | None = None
        self._scalars = ScalarChunkWriter(out_dir, worker)
        self._closed = False
        self._ended = False
        self._thread = threading.Thread(target=self._run, name="trainprobe-writer", daemon=True)
        self._ahead_thread = threading.Thread(
            target=self._look_ahead, name="trainprobe-writer-ahead", daemon=True
        )
        self._thread.start()
        self._ahead_thread.start()

    # ----- the training thread's side -----

    def submit(self, message: Message) -> None:
        """Queue ``message``; blocks while the queue is full.

        After a failure, tensors are dropped; the collections file and the end marker are still
        queued (they keep the steps already on disk readable).
        """
        if self._closed or (self.error is not None and not _kept_after_failure(message)):
            return
        size = _size(message)
        with self._condition:
            if self._full(size):
                started = time.perf_counter()
                while self._full(size) and self.error is None:
                    self._condition.wait()
                self.blocked_seconds += time.perf_counter() - started
            if self.error is not None and not _kept_after_failure(message):
                return
            ahead = _ahead_of(message)
            self._queue.append(_Queued(message, size, ahead))
            if ahead is not None:
                self._to_prepare.append(ahead)
            self._pending_bytes += size
            self._condition.notify_all()

    def _full(self, size: int) -> bool:
        if not self._queue:
            return False
        return len(self._queue) >= self.max_items or self._pending_bytes + size > self.max_bytes

    @property
    def pending_bytes(self) -> int:
        """Bytes handed over and not yet written."""
        return self._pending_bytes

    def write_training_end(self) -> None:
        """Queue the end-of-training marker (after everything queued before it)."""
        self.submit(_TrainingEnd())

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is written (or dropped after a failure)."""
        if not self._thread.is_alive():
            return True
        done = threading.Event()
        with self._condition:
            self._queue.append(_Queued(_Flush(done), 0))
            self._condition.notify_all()
        return done.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Write everything queued, then stop the thread. Safe to call more than once."""
        if self._closed:
            return
        with self._condition:
            self._queue.append(_Queued(_Stop(), 0))
            self._closed = True
            self._condition.notify_all()
        self._thread.join(timeout)
        self._ahead_thread.join(timeout)

    # ----- the writer thread's side -----

    def _next(self) -> _Queued:
        with self._condition:
            while not self._queue:
                self._condition.wait()
            return self._queue[0]

    def _done(self, size: int) -> None:
        with self._condition:
            self._queue.popleft()
            self._pending_bytes -= size
            self._condition.notify_all()

    def _look_ahead(self) -> None:
        """The look-ahead thread: prepare the queued records in order (see the module
        docstring) until the writing thread has ended."""
        while True:
            with self._condition:
                while not self._to_prepare and not self._ended:
                    self._condition.wait()
                if not self._to_prepare:
                    return
                ahead = self._to_prepare.popleft()
            if self.error is None:
                ahead.prepare()
            else:  # it will be dropped: nothing waits for it
                ahead.done.set()

    def _run(self) -> None:
        try:
            self._write_all()
        finally:
            with self._condition:
                self._ended = True
                self._condition.notify_all()

    def _write_all(self) -> None:
        while True:
            queued = self._next()
            message, size = queued.message, queued.size
            try:
                if isinstance(message, _Stop):
                    try:
                        self._close_step()
                        self._keep_scalars()
                    finally:
                        self._end_tensorboard(close=True)
                    return
                if isinstance(message, _Flush):
                    message.done.set()
                elif self.error is None:
                    self._handle(message, queued.ahead)
                elif isinstance(message, SideJob):
                    self._run_side_job(message)
                elif isinstance(message, (CollectionsJob, _TrainingEnd)):
                    self._finish_after_failure(message)
            except BaseException as error:
                self._fail(error, getattr(message, "step", None))
            finally:
                self._done(size)

    def _handle(self, message: Message, ahead: _Ahead | None = None) -> None:
        if isinstance(message, TensorRecord):
            if ahead is None:
                array, encoded = _resolve(message.value), None
            else:
                array, encoded = ahead.result()
            if message.save_raw:
                step = self._step(message.step)
                if encoded is not None:
                    step.add_encoded(
                        message.name,
                        encoded,
                        mode=message.mode,
                        mode_step=message.mode_step,
                        shard=message.shard,
                    )
                else:
                    step.add(
                        message.name,
                        array,
                        mode=message.mode,
                        mode_step=message.mode_step,
                        wall_time=message.wall_time,
                        original_dtype=message.original_dtype,
                        shard=message.shard,
                    )
                if message.shard is None:
                    self._scalars.add(message.step, message.mode.name, message.name, array)
            summary = message.summary
            if summary is not None and self.tensorboard is not None:
                self.tensorboard.add(
                    message.mode,
                    message.step,
                    summary.collection,
                    message.name,
                    array,
                    summary.scalar,
                    wall_time=message.wall_time,
                )
            _release(message.value)
        elif isinstance(message, ScalarBatch):
            values = (_resolve(message.values) if ahead is None else ahead.result()[0]).reshape(-1)
            step = self._step(message.step)
            step.add_scalars(
                message.names,
                message.dtypes,
                values,
                mode=message.mode,
                mode_step=message.mode_step,
                wall_time=message.wall_time,
            )
            step.add_shards(message.shards)
            self._scalars.add_scalars(
                message.step, message.mode.name, message.names, message.dtypes, values
            )
            if message.export and self.tensorboard is not None:
                self._export_scalars(self.tensorboard, message, values)
        elif isinstance(message, RecordedSteps):
            for recorded in message.steps:
                self._record(recorded)
        elif isinstance(message, ShapeRecord):
            self._step(message.step).add_shape(
                message.name,
                message.name,
                message.shape,
                mode=message.mode,
                mode_step=message.mode_step,
            )
        elif isinstance(message, EndStep):
            if self._writer is not None and self._writer.step == message.step:
                self._close_step()
            self._end_tensorboard(close=False)
        elif isinstance(message, CollectionsJob):
            write_collections_file(
                self.out_dir, self.worker, message.collections, message.num_workers
            )
            self.bytes_written += len(encode_collections(message.collections, message.num_workers))
        elif isinstance(message, _TrainingEnd):
            self._close_step()
            self._keep_scalars()
            write_training_end(self.out_dir)
        elif isinstance(message, SideJob):
            self._run_side_job(message)

    def _record(self, recorded: RecordedStep) -> None:
        """Keep one step's record (``storage.training_record``) with the chunks, and export it."""
        found = _resolve(recorded.values).reshape(-1)
        # A learning rate held on a device arrives with the loss and the norm, third.
        rate = float(found[2]) if found.size > 2 else recorded.learning_rate
        values = np.array([found[0], rate, found[1], recorded.mode_step], np.float64)
        mode = recorded.mode.name
        self.bytes_written += self._scalars.add_record(recorded.step, mode, values)
        export = self.tensorboard
        if export is not None:
            for name, value in zip(RECORDED, values, strict=True):
                if name in CHARTED and np.isfinite(value):
                    export.add(
                        recorded.mode,
                        recorded.step,
                        "",
                        name,
                        np.asarray(value, np.float64),
                        True,
                        wall_time=recorded.wall_time,
                    )
        _release(recorded.values)

    @staticmethod
    def _run_side_job(job: SideJob) -> None:
        try:
            job.run()
        except Exception as error:
            log.warning(
                "trainprobe: a side job of the writer thread failed (%s: %s)",
                type(error).__name__,
                error,
            )
            log.debug("trainprobe: the side job's traceback", exc_info=True)

    @staticmethod
    def _export_scalars(export: TensorBoardExport, batch: ScalarBatch, values: np.ndarray) -> None:
        for index, (name, dtype) in enumerate(zip(batch.names, batch.dtypes, strict=True)):
            value = np.asarray(values[index], dtype=dtype)
            export.add(batch.mode, batch.step, "", name, value, True, wall_time=batch.wall_time)

    def _step(self, step: int) -> StepWriter:
        if self._writer is not None and self._writer.step != step:
            self._close_step()
        if self._writer is None:
            self._writer = StepWriter(self.out_dir, step, self.worker)
        return self._writer

    def _close_step(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            written = writer.close()
            self.bytes_written += written
            if written:
                self.steps_written += 1
                self.bytes_written += self._scalars.step_written(writer.step)

    def _keep_scalars(self) -> None:
        """Keep the scalars written since the last chunk as a chunk (the writer ends)."""
        self.bytes_written += self._scalars.flush()

    def _end_tensorboard(self, *, close: bool) -> None:
        """Flush (at a step's end) or close the export, and count the bytes it wrote."""
        export = self.tensorboard
        if export is None:
            return
        if close:
            export.close()
        else:
            export.flush()
        written = export.bytes_written
        self.bytes_written += written - self._tensorboard_bytes
        self._tensorboard_bytes = written

    def _finish_after_failure(self, message: CollectionsJob | _TrainingEnd) -> None:
        # After a failure the steps already on disk stay readable: the collections file and
        # the end marker are still attempted, and a second failure is only logged.
        try:
            self._handle(message)
        except Exception:
            log.debug(
                "writing %s after a failure failed too", type(message).__name__, exc_info=True
            )

    def _fail(self, error: BaseException, step: int | None) -> None:
        self._scalars.stop("the step files could not be written")
        writer, self._writer = self._writer, None
        if step is None and writer is not None:
            step = writer.step
        if writer is not None:
            try:
                writer.discard()
            except Exception:
                log.debug("discarding a failed step also failed", exc_info=True)
        if self.error is None:
            self.error = error
            self.failed_step = step
            with self._condition:
                self._condition.notify_all()
            if self.on_error is not None:
                try:
                    self.on_error(error)
                except Exception:
                    log.debug("the writer's error callback failed", exc_info=True)
