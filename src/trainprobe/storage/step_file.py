"""Writing one (global step, worker): its event file of tensor records and its index file.

The hook opens a ``StepWriter`` per saved step, ``add``s each tensor (from its writer thread)
or ``add_scalars`` a batch of scalars (its reductions) in one write, and ``close``s it. The
event file is written under a temporary name as tensors arrive and renamed into place on close,
then the index file appears: a reader that sees the index can always read the records it points
to. The index also carries each record's checksum (``index_file``), computed here, never on the
training's thread: by ``add``, or ahead of the write by ``encode_tensor`` on another thread (the
writer's, which checksums the next large tensor while it writes one), for ``add_encoded``. A step
that saved nothing leaves no file at all.

The collections file and the end-of-training marker are written by the functions re-exported
here, so the hook needs only this module.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

import numpy as np

from trainprobe.storage import files, locations
from trainprobe.storage.collections_file import write_collections_file
from trainprobe.storage.index_file import (
    ShapeEntry,
    StepIndex,
    TensorColumns,
    TensorLocation,
    encode_index,
)
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.scalar_records import encode_scalar_records
from trainprobe.storage.tensor_event import DTYPE_CODES, encode_tensor_event
from trainprobe.storage.tfrecord import Buffer, frame, payload_checksum
from trainprobe.storage.training_end import training_has_ended, write_training_end

__all__ = [
    "EncodedTensor",
    "StepWriter",
    "encode_tensor",
    "training_has_ended",
    "write_collections_file",
    "write_training_end",
]


@dataclass(frozen=True)
class EncodedTensor:
    """One tensor's record, framed (its large buffer passed through, not copied), and the
    payload's masked CRC32C for the index."""

    record: list[Buffer]
    checksum: int


def encode_tensor(
    name: str,
    array: np.ndarray,
    *,
    step: int,
    mode: ModeKeys,
    mode_step: int,
    wall_time: float,
    original_dtype: str | None = None,
) -> EncodedTensor:
    """Tensor ``name``'s record in the file of ``step`` (see ``StepWriter.add``). TypeError for
    a dtype that cannot be saved."""
    chunks = encode_tensor_event(
        name,
        array,
        step=step,
        mode=ModeKeys(mode),
        mode_step=mode_step,
        wall_time=wall_time,
        original_dtype=original_dtype,
    )
    return EncodedTensor(frame(chunks), payload_checksum(chunks))


class StepWriter:
    """Writes one (global step, worker)'s event file and index file, smdebug's layout.

    Safe to use from one thread other than the one that created it, and from several threads
    at once (``add`` takes a lock). Arrays are written out during ``add``; no reference to them
    is kept.
    """

    def __init__(self, out_dir: str, step: int, worker: str) -> None:
        self.out_dir = out_dir
        self.step = step
        self.worker = worker
        self._lock = threading.Lock()
        self._events: files.AtomicFile | None = None
        self._tensors = TensorColumns()
        self._shapes: list[ShapeEntry] = []
        self._mode: ModeKeys | None = None
        self._mode_step = step
        self._closed = False

    def __enter__(self) -> StepWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()

    def _first_mode(self, mode: ModeKeys, mode_step: int) -> None:
        # The index's meta holds the mode of the first tensor written, as smdebug does.
        if self._mode is None:
            self._mode, self._mode_step = ModeKeys(mode), mode_step

    def add(
        self,
        name: str,
        array: np.ndarray,
        *,
        mode: ModeKeys,
        mode_step: int,
        wall_time: float | None = None,
        original_dtype: str | None = None,
    ) -> None:
        """Append tensor ``name`` to the step's event file.

        ``mode`` and ``mode_step`` say which phase the step belongs to; ``wall_time`` defaults
        to now. ``original_dtype`` names the dtype a tensor had before it was converted for
        numpy (``"bfloat16"`` saved as float32); smdebug ignores it, trainprobe reports it.
        Raises TypeError for a dtype that cannot be saved.
        """
        if isinstance(array, np.ndarray) and array.ndim == 0 and array.dtype.name in DTYPE_CODES:
            self.add_scalars(
                [name],
                [array.dtype.name],
                array.reshape(1),
                mode=mode,
                mode_step=mode_step,
                wall_time=wall_time,
                original_dtype=original_dtype,
            )
            return
        encoded = encode_tensor(
            name,
            array,
            step=self.step,
            mode=mode,
            mode_step=mode_step,
            wall_time=time.time() if wall_time is None else wall_time,
            original_dtype=original_dtype,
        )
        self.add_encoded(name, encoded, mode=mode, mode_step=mode_step)

    def add_encoded(
        self, name: str, encoded: EncodedTensor, *, mode: ModeKeys, mode_step: int
    ) -> None:
        """Append tensor ``name``'s record, encoded for this step by ``encode_tensor``."""
        with self._lock:
            events = self._open_events()
            start = events.size
            events.writelines(encoded.record)
            self._tensors.append(TensorLocation(name, start, events.size - start, encoded.checksum))
            self._first_mode(mode, mode_step)

    def add_scalars(
        self,
        names: Sequence[str],
        dtypes: Sequence[str],
        values: np.ndarray,
        *,
        mode: ModeKeys,
        mode_step: int,
        wall_time: float | None = None,
        original_dtype: str | None = None,
    ) -> None:
        """Append many 0-d tensors at once: ``names[i]`` holds ``values[i]`` as ``dtypes[i]``.

        The same bytes as ``add``-ing each ``np.asarray(values[i], dtype=dtypes[i])`` in turn,
        at a fraction of the cost: the hook writes its reductions this way at every step.
        Raises TypeError for a dtype that cannot be saved (then nothing is appended).
        """
        records = encode_scalar_records(
            names,
            dtypes,
            values,
            step=self.step,
            mode=ModeKeys(mode),
            mode_step=mode_step,
            wall_time=time.time() if wall_time is None else wall_time,
            original_dtype=original_dtype,
        )
        with self._lock:
            events = self._open_events()
            offsets = itertools.accumulate(records.lengths, initial=events.size)
            starts = itertools.islice(offsets, len(records.lengths))  # not the last one's end
            self._tensors.extend(names, starts, records.lengths, records.checksums)
            events.write(records.data)
            self._first_mode(mode, mode_step)

    def _open_events(self) -> files.AtomicFile:
        # The event file appears (under its temporary name) with the step's first tensor.
        if self._closed:
            raise ValueError(f"step {self.step} of {self.worker} is already closed")
        if self._events is None:
            path = locations.event_file(self.step, self.worker)
            self._events = files.AtomicFile(locations.join(self.out_dir, path))
        return self._events

    def add_shape(
        self,
        name: str,
        original_name: str,
        shape: tuple[int, ...],
        *,
        mode: ModeKeys | None = None,
        mode_step: int | None = None,
    ) -> None:
        """Record a tensor's shape without its values (the index's ``shape_payload``).

        The mode defaults to the step's (that of its first tensor; GLOBAL when there is none).
        """
        entry = ShapeEntry(name, original_name, tuple(int(size) for size in shape))
        with self._lock:
            if self._closed:
                raise ValueError(f"step {self.step} of {self.worker} is already closed")
            self._shapes.append(entry)
            if mode is not None:
                self._first_mode(mode, self.step if mode_step is None else mode_step)

    def close(self) -> int:
        """Finish the step: the event file is renamed into place, then the index file written.

        Returns the bytes written (both files); a step with no tensors and no shapes writes
        nothing and returns 0. Closing twice does nothing the second time.
        """
        with self._lock:
            if self._closed:
                return 0
            self._closed = True
            events, self._events = self._events, None
            if not self._tensors and not self._shapes:
                return 0
            written = 0
            event_file = None
            if events is not None:
                events.commit()
                written += events.size
                event_file = locations.event_file(self.step, self.worker)
            index = StepIndex(
                step=self.step,
                worker=self.worker,
                mode=self._mode or ModeKeys.GLOBAL,
                mode_step=self._mode_step,
                event_file=event_file,
                tensors=self._tensors,
                shapes=self._shapes,
            )
            path = locations.join(self.out_dir, locations.index_file(self.step, self.worker))
            written += files.write_atomic(path, encode_index(index))
            return written

    def discard(self) -> None:
        """Abandon the step: nothing of it appears on disk."""
        with self._lock:
            self._closed = True
            if self._events is not None:
                self._events.discard()
                self._events = None
            self._tensors = TensorColumns()
            self._shapes.clear()
