"""The step in progress: what it has captured, handed to the writer thread as it arrives.

The hook tells it when a step begins (with the collections due) and when it ends; in between,
every tensor the hook sees goes through ``capture``, which learns from the save plan what to save
of it (once per batch of names: ``batch_layout``): raw tensors start their host copy at once and
go to the writer thread; reductions are computed on the device and kept until the step ends,
when they leave in one buffer. Shapes are recorded in the index. Nothing here writes a file or
waits for the device.

A sharded tensor (a ``DTensor``: FSDP2, tensor parallelism) is saved as the piece this rank
holds (``shards``): its raw value by the first of the piece's replicas, with where it lies in
the full tensor (the trial puts the pieces together), its shape as the full tensor's, and its
reductions as the full tensor's, combined from every rank's piece (``shard_reductions``) through
the one exchange of the step (``shard_exchange``), which the first such tensor makes. Every rank
of a sharded training writes. In a training of several processes each parameter saved also gets
its fingerprint (``device_passes.FINGERPRINT``), for the ReplicaDivergence rule.

The training record (every TRAIN step's loss, learning rate and gradient norm) is handed over
in batches (``record``): a step's record goes to the writer after its files, and before the files
of any later step, so that the writer's chunks cover the steps in order
(``storage.written_scalars``).

TensorBoard export (rank 0 only, when a ``tensorboard_dir`` is given) rides on the same records:
each carries the summary the plan chose, the scalar batch is marked for export, and a tensor whose
collection wants a histogram but saves only reductions gets one more host copy, for the histogram
alone. The writer thread does the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trainprobe.capture.pytorch import naming
from trainprobe.capture.pytorch.batch_layout import BatchLayouts
from trainprobe.capture.pytorch.device_passes import FINGERPRINT
from trainprobe.capture.pytorch.device_reductions import ReductionBatch
from trainprobe.capture.pytorch.distributed import Worker, this_worker
from trainprobe.capture.pytorch.host_copy import original_dtype_of, start_copies
from trainprobe.capture.pytorch.shard_exchange import ShardExchange
from trainprobe.capture.pytorch.shards import Piece, has_pieces, piece_of
from trainprobe.capture.save_plan import SavePlan, TensorPlan
from trainprobe.capture.tensorboard_export import Summary, TensorBoardExport
from trainprobe.capture.writer_thread import (
    CollectionsJob,
    EndStep,
    RecordedStep,
    RecordedSteps,
    ScalarBatch,
    ShapeRecord,
    TensorRecord,
    WriterThread,
)
from trainprobe.storage.index_file import ShardEntry
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.reduction_names import fingerprint_tensor_name

__all__ = ["Step", "StepCapture"]

log = logging.getLogger("trainprobe")

_SCALAR = Summary("", scalar=True)
RECORD_BATCH = 50
RECORD_SECONDS = 1.0
"""Recorded steps are handed to the writer this many at a time, or after this many seconds."""


@dataclass
class Step:
    """The step in progress: its numbers, the collections due (a bit mask), whether it saved."""

    step: int
    mode: ModeKeys
    mode_step: int
    due: int
    wall_time: float
    sent: bool = False
    full: bool = False
    """Whether every tensor seen from now on is saved raw (the step went non-finite)."""


class StepCapture:
    """Captures one worker's tensors step by step into ``out_dir`` through a writer thread.

    ``include_workers`` is ``"one"`` (only rank 0 writes) or ``"all"``. ``collections`` gives the
    collections file's content when it is due. ``on_error`` is called (from the writer thread)
    with the first write failure. ``tensorboard_dir``, when given, is where rank 0 exports
    TensorBoard summaries of what it saves (``export`` is that export once the writer starts).
    """

    def __init__(
        self,
        plan: SavePlan,
        out_dir: str,
        include_workers: str,
        collections: Callable[[], dict[str, Any]],
        on_error: Callable[[BaseException], None],
        tensorboard_dir: str | None = None,
    ) -> None:
        self.plan = plan
        self.tensorboard_dir = tensorboard_dir
        self.export: TensorBoardExport | None = None
        self.out_dir = out_dir
        self.include_workers = include_workers
        self.current: Step | None = None
        self.worker: Worker | None = None
        self.writer: WriterThread | None = None
        self._collections = collections
        self._on_error = on_error
        self._lock = threading.RLock()
        self._counts: dict[str, int] = {}
        self._reductions = ReductionBatch()
        self._saved_a_step = False
        self._collections_sent: tuple[dict[str, Any], int] | None = None
        self._skipped: set[str] = set()
        self._layouts = BatchLayouts(plan)
        self.sharded = False
        """Whether a registered model is sharded: then every rank writes (its pieces)."""
        self.exchange: ShardExchange | None = None
        # Names whose sharded reductions or fingerprint the step already has (a step saved in
        # full captures its parameters twice; the ranks' exchanges must hold the same).
        self._combined: set[str] = set()
        self._fingerprinted: set[str] = set()
        self._placed: list[ShardEntry] = []  # pieces fingerprinted, for the index
        self._recorded: list[RecordedStep] = []
        self._recorded_sent_at = time.monotonic()

    # ----- who writes -----

    def resolve_worker(self) -> Worker:
        """This process's worker (decided once, when first needed)."""
        if self.worker is None:
            self.worker = this_worker()
        return self.worker

    @property
    def writes(self) -> bool:
        """Whether this worker writes files (rank 0, or every rank with ``"all"``)."""
        worker = self.resolve_worker()
        return self.include_workers == "all" or worker.is_chief or self.sharded

    def ensure_writer(self) -> WriterThread:
        """The writer thread, started on first use."""
        if self.writer is None:
            worker = self.resolve_worker()
            if self.tensorboard_dir is not None and worker.is_chief:
                self.export = TensorBoardExport(self.tensorboard_dir)
            self.writer = WriterThread(
                self.out_dir, worker.name, on_error=self._on_error, tensorboard=self.export
            )
        return self.writer

    # ----- the step -----

    def begin(self, step: int, mode: ModeKeys, mode_step: int, due: int) -> Step:
        """Start step ``step``; ``due`` says which saved collections are due in it."""
        self.current = Step(step, mode, mode_step, due, time.time())
        self._counts = {}
        self._combined.clear()
        self._fingerprinted.clear()
        self._placed = []
        return self.current

    def save_in_full(self) -> None:
        """From now on in this step, save every tensor raw, whatever the plan says."""
        if self.current is not None:
            self.current.full = True

    def finish(self) -> Step | None:
        """End the step in progress: its reductions leave, its file is closed; returns it."""
        current, self.current = self.current, None
        if current is None:
            return None
        with self._lock:
            writer = self.writer
            if self._reductions and writer is not None:
                batch, self._reductions = self._reductions, ReductionBatch()
                names, dtypes, values = batch.finish(current.step, self.exchange)
                writer.submit(
                    ScalarBatch(
                        current.step,
                        names,
                        dtypes,
                        values,
                        current.mode,
                        current.mode_step,
                        current.wall_time,
                        export=self.export is not None,
                        shards=self._placed,
                    )
                )
                current.sent = True
            if current.sent and writer is not None:
                # The records of earlier steps before this step's files, its own after them.
                earlier = [row for row in self._recorded if row.step < current.step]
                self._recorded = self._recorded[len(earlier) :]
                self._send_records(earlier)
                writer.submit(EndStep(current.step))
                if not self._saved_a_step:
                    self._saved_a_step = True
                    self.write_collections()
            elif (
                len(self._recorded) >= RECORD_BATCH
                or time.monotonic() - self._recorded_sent_at >= RECORD_SECONDS
            ):
                rows, self._recorded = self._recorded, []
                self._send_records(rows)
        return current

    def record(self, row: RecordedStep) -> None:
        """Hand over the record of the step in progress (or one that has ended), in its turn
        (see the module docstring)."""
        self._recorded.append(row)

    def _send_records(self, rows: list[RecordedStep]) -> None:
        if rows:
            self._recorded_sent_at = time.monotonic()
            self.ensure_writer().submit(RecordedSteps(rows))

    def write_collections(self) -> None:
        """Queue this worker's collections file, unless it would repeat the last one."""
        worker = self.resolve_worker()
        count = worker.world_size if self.include_workers == "all" or self.sharded else 1
        content = (self._collections(), count)
        if content == self._collections_sent:
            return
        self._collections_sent = content
        self.ensure_writer().submit(CollectionsJob(*content))

    # ----- tensors -----

    def capture_named(self, name: str, suffix: str, value: Any) -> None:
        """Capture a module's inputs or outputs as ``<name><suffix><i>``, counting on per step."""
        key = name + suffix
        items = []
        with self._lock:
            index = self._counts.get(key, 0)
            for tensor in naming.module_tensors(value):
                items.append((f"{key}{index}", tensor))
                index += 1
            self._counts[key] = index
        self.capture(items)

    def capture(
        self, items: Iterable[tuple[str, torch.Tensor]], *, parameters: bool = False
    ) -> None:
        """Save what the plan says of each (name, tensor); reductions batched by request.
        ``parameters``: the tensors are a model's parameters (fingerprinted in a training of
        several processes)."""
        current = self.current
        if current is None or not (current.due or current.full):
            return
        batch = items if isinstance(items, list) else list(items)
        if not batch:
            return
        pieces: dict[int, Piece] = {}
        if has_pieces([tensor for _, tensor in batch]):
            batch, pieces = self._local_pieces(batch)
        with self._lock:
            writer = self.ensure_writer()
            layout = self._layouts.of(tuple(name for name, _ in batch), current.due, current.full)
            left_out, unreduced = self._check(batch, layout.wanted)
            stored = layout.stored if self.export is None else layout.summarised
            saved = [
                (batch[i][0], batch[i][1], layout.plans[i], pieces.get(i))
                for i in stored
                if i not in left_out and (i not in pieces or pieces[i].writes)
            ]
            if saved:
                self._save(writer, current, saved)
            skipped = left_out | unreduced
            for ops, (indices, names) in layout.reduced.items():
                kept = [k for k, i in enumerate(indices) if i not in skipped or i in pieces]
                plain = [k for k in kept if indices[k] not in pieces]
                if plain:
                    self._reductions.add(
                        [names[k] for k in plain], [batch[indices[k]][1] for k in plain], ops
                    )
                    current.sent = True
                if pieces:
                    self._reduce_pieces(batch, pieces, indices, names, kept, ops, unreduced)
            if parameters and self.resolve_worker().world_size > 1:
                self._fingerprint(batch, layout.wanted, left_out, pieces)

    def _local_pieces(
        self, batch: list[tuple[str, torch.Tensor]]
    ) -> tuple[list[tuple[str, torch.Tensor]], dict[int, Piece]]:
        """``batch`` with each sharded tensor's local piece in its place, and the pieces by
        position. Without an exchange to combine them (a training of one process, or one whose
        model was registered before it was sharded) pieces are saved as ordinary tensors."""
        if self.exchange is None and self.sharded and self.resolve_worker().world_size > 1:
            self.exchange = ShardExchange.create(self.flush)  # every rank is here, at this step
        local: list[tuple[str, torch.Tensor]] = []
        pieces: dict[int, Piece] = {}
        combinable = self.exchange is not None or self.resolve_worker().world_size == 1
        for index, (name, tensor) in enumerate(batch):
            value, piece = piece_of(tensor)
            local.append((name, value))
            if piece is not None and combinable:
                pieces[index] = piece
        return local, pieces

    def _reduce_pieces(
        self,
        batch: list[tuple[str, torch.Tensor]],
        pieces: dict[int, Piece],
        indices: tuple[int, ...],
        names: list[tuple[str, ...]],
        kept: list[int],
        ops: tuple[tuple[str, bool], ...],
        unreduced: set[int],
    ) -> None:
        """Add the sharded tensors among ``indices`` to the step's exchange (once a name)."""
        chosen = [
            k
            for k in kept
            if indices[k] in pieces
            and indices[k] not in unreduced
            and batch[indices[k]][0] not in self._combined
        ]
        if not chosen:
            return
        self._combined.update(batch[indices[k]][0] for k in chosen)
        self._reductions.add_sharded(
            [names[k] for k in chosen],
            [batch[indices[k]][1] for k in chosen],
            [pieces[indices[k]] for k in chosen],
            ops,
        )
        assert self.current is not None
        self.current.sent = True

    def _fingerprint(
        self,
        batch: list[tuple[str, torch.Tensor]],
        wanted: tuple[int, ...],
        left_out: set[int],
        pieces: dict[int, Piece],
    ) -> None:
        """Add the fingerprints of the parameters saved (once a name a step), and where the
        pieces of sharded ones lie (replicas of a piece are compared with each other)."""
        chosen = [
            i
            for i in wanted
            if i not in left_out
            and batch[i][0] not in self._fingerprinted
            and batch[i][1].is_floating_point()
        ]
        if not chosen:
            return
        self._fingerprinted.update(batch[i][0] for i in chosen)
        self._placed += [pieces[i].entry(batch[i][0]) for i in chosen if i in pieces]
        self._reductions.add(
            [(fingerprint_tensor_name(batch[i][0]),) for i in chosen],
            [batch[i][1] for i in chosen],
            (FINGERPRINT,),
        )

    def _check(
        self, batch: list[tuple[str, torch.Tensor]], wanted: tuple[int, ...]
    ) -> tuple[set[int], set[int]]:
        """Of the ``wanted`` tensors: those left out (empty, not dense) and those saved but
        not reduced (complex). An empty piece of a sharded tensor is left out of what is
        written, but still takes part in the full tensor's reductions (with no values)."""
        left_out: set[int] = set()
        unreduced: set[int] = set()
        for index in wanted:
            name, tensor = batch[index]
            if tensor.numel() == 0 or not self._dense(name, tensor):
                left_out.add(index)
            elif tensor.is_complex():
                unreduced.add(index)
        return left_out, unreduced

    def _dense(self, name: str, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` is an ordinary dense tensor; others are skipped (said once)."""
        if tensor.layout == torch.strided and not tensor.is_quantized:
            return True
        if name not in self._skipped:
            self._skipped.add(name)
            kind = "quantized" if tensor.is_quantized else str(tensor.layout)
            log.warning("trainprobe: %s is a %s tensor; such tensors are not saved", name, kind)
        return False

    def _save(
        self,
        writer: WriterThread,
        current: Step,
        saved: list[tuple[str, torch.Tensor, TensorPlan, Piece | None]],
    ) -> None:
        """Send the raw values (their host copies started together) and the shapes of
        ``saved`` (a sharded tensor's: the full tensor's) to the writer."""
        export = self.export is not None
        copied = [
            tensor
            for _, tensor, plan, piece in saved
            if _copies(plan, plan.summary if export and piece is None else None, tensor)
        ]
        copies = iter(start_copies(copied))
        for name, tensor, plan, piece in saved:
            summary = plan.summary if export and piece is None else None
            if _copies(plan, summary, tensor):
                writer.submit(
                    TensorRecord(
                        current.step,
                        name,
                        next(copies),
                        current.mode,
                        current.mode_step,
                        time.time(),
                        original_dtype_of(tensor),
                        summary=summary,
                        save_raw=plan.raw,
                        shard=None if piece is None else piece.entry(name),
                    )
                )
                current.sent = True
            if plan.shape:
                full = tensor.shape if piece is None else piece.shape
                shape = tuple(int(size) for size in full)
                writer.submit(
                    ShapeRecord(current.step, name, shape, current.mode, current.mode_step)
                )
                current.sent = True

    def add_scalar(self, name: str, value: object, timestamp: float | None = None) -> None:
        """Save a single number in the step in progress, whatever the save plan says.

        A Python or NumPy number is saved with shape (1,), as smdebug saves it; ``timestamp``
        (seconds since the epoch) is the record's time, default now.
        """
        current = self.current
        if current is None:
            return
        with self._lock:
            writer = self.ensure_writer()
            if isinstance(value, torch.Tensor):
                self._reductions.add_value(name, _numpy_name(value.dtype), value)
            else:
                array = np.asarray(value)
                if np.isscalar(value):
                    array = array.reshape(1)
                summary = _SCALAR if self.export is not None else None
                record = TensorRecord(
                    current.step,
                    name,
                    array,
                    current.mode,
                    current.mode_step,
                    time.time() if timestamp is None else timestamp,
                    summary=summary,
                )
                writer.submit(record)
            current.sent = True

    # ----- the end -----

    def flush(self) -> None:
        """Wait until everything handed over so far is written."""
        if self.writer is not None:
            self.writer.flush()

    def close(self, *, training_end: bool) -> None:
        """Hand over the steps' records, write the collections file (and the end marker), then
        stop the writer thread."""
        rows, self._recorded = self._recorded, []
        with self._lock:
            self._send_records(rows)
        self.write_collections()
        if training_end:
            self.ensure_writer().write_training_end()
        if self.writer is not None:
            self.writer.close()

    @property
    def error(self) -> BaseException | None:
        """The writer's first failure, if any."""
        return self.writer.error if self.writer is not None else None

    def bytes_written(self) -> int:
        """Bytes of every file written so far."""
        return self.writer.bytes_written if self.writer is not None else 0

    def blocked_seconds(self) -> float:
        """Seconds the training waited for room in the writer's queue."""
        return self.writer.blocked_seconds if self.writer is not None else 0.0


def _copies(plan: TensorPlan, summary: Summary | None, tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is copied to the host: for its raw value, or, saved without it, for
    its histogram alone."""
    if plan.raw:
        return True
    if summary is None:
        return False
    return not summary.scalar and tensor.dtype != torch.bool and not tensor.is_complex()


def _numpy_name(dtype: torch.dtype) -> str:
    if dtype == torch.bfloat16:
        return "float32"
    return str(torch.empty((), dtype=dtype).numpy().dtype)
