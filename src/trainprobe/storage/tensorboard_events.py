"""TensorBoard event files, encoded by hand: scalars, histograms, and the log directory they go in.

What TensorBoard reads is a TFRecord file of TF ``Event`` messages whose footers carry the real
masked CRC32C of each payload (unlike smdebug's ``events/`` files). The messages written here::

    Event {wall_time: 1, step: 2, file_version: 3 = "brain.Event:2"}          (first record)
    Event {wall_time: 1, step: 2, summary: 5 {value: 1 {tag: 1, simple_value: 2}}}
    Event {wall_time: 1, step: 2, summary: 5 {value: 1 {tag: 1, histo: 5 = HistogramProto {
        min: 1, max: 2, num: 3, sum: 4, sum_squares: 5,
        bucket_limit: 6 (packed doubles), bucket: 7 (packed doubles)}}}}

``simple_value`` and ``histo`` belong to a ``oneof``, so they are written even when zero (a loss
of exactly 0.0 must still read as a scalar). Histograms use TensorFlow's default buckets: edges
growing by 10% from 1e-12 up to 1e20 on both sides of zero, closed by -DBL_MAX, 0 and DBL_MAX;
a value falls in the first bucket whose limit is greater than it, and runs of empty buckets are
collapsed into one, as TensorFlow encodes them. Values that are not finite (NaN, infinity) are
left out of a histogram: TensorBoard cannot place them.

Layout (``TensorBoardWriter``): one file per mode for the whole run, one mode per sub-directory,
so that TensorBoard shows each mode as a run::

    <log_dir>/<MODE>/events.out.tfevents.<unix time:010>.<hostname>.<pid>

smdebug wrote one file per mode *per saved step*; a single appended file reads the same in
TensorBoard and keeps the directory small. A file appears atomically with its ``file_version``
record already inside, and is then appended one whole step at a time, records only ever whole:
a reader that catches a step half-written sees a short final record, which TensorBoard treats
as "not there yet" and reads again later.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import sys
import time
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from trainprobe.storage import files
from trainprobe.storage import protobuf_wire as wire
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.tfrecord import frame

__all__ = [
    "FILE_VERSION",
    "Histogram",
    "TensorBoardWriter",
    "default_bucket_limits",
    "encode_file_version_event",
    "encode_histogram_event",
    "encode_scalar_event",
    "event_file_name",
    "histogram_of",
]

FILE_VERSION = "brain.Event:2"
EVENT_FILE_PREFIX = "events.out.tfevents."

# Event, Summary, Summary.Value and HistogramProto field numbers (TF's summary/event protos).
_EVENT_WALL_TIME, _EVENT_STEP, _EVENT_FILE_VERSION, _EVENT_SUMMARY = 1, 2, 3, 5
_SUMMARY_VALUE = 1
_VALUE_TAG, _VALUE_SIMPLE_VALUE, _VALUE_HISTO = 1, 2, 5
_HISTO_MIN, _HISTO_MAX, _HISTO_NUM, _HISTO_SUM, _HISTO_SUM_SQUARES = 1, 2, 3, 4, 5
_HISTO_BUCKET_LIMIT, _HISTO_BUCKET = 6, 7

_FLOAT = struct.Struct("<f")
_HISTOGRAM_CHUNK = 1 << 20  # values bucketed at a time: bounds the float64 copy
_FLUSH_BYTES = 1 << 20  # pending bytes of one mode that trigger a write mid-step


def _make_default_bucket_limits() -> np.ndarray:
    positive: list[float] = []
    edge = 1.0e-12
    while edge < 1.0e20:
        positive.append(edge)
        edge *= 1.1
    positive.append(sys.float_info.max)
    negative = [-limit for limit in reversed(positive)]
    limits = np.array([*negative, 0.0, *positive], dtype=np.float64)
    limits.setflags(write=False)
    return limits


_DEFAULT_LIMITS = _make_default_bucket_limits()


def default_bucket_limits() -> np.ndarray:
    """TensorFlow's default histogram bucket limits (read-only), from -DBL_MAX to DBL_MAX."""
    return _DEFAULT_LIMITS


@dataclass(frozen=True)
class Histogram:
    """A ``HistogramProto``: summary statistics and the non-collapsed bucket counts.

    ``bucket[i]`` counts the values below ``bucket_limit[i]`` and at or above the limit before it.
    """

    min: float
    max: float
    num: float
    sum: float
    sum_squares: float
    bucket_limit: np.ndarray
    bucket: np.ndarray


def histogram_of(values: np.ndarray) -> Histogram | None:
    """The histogram of an array's finite values in TensorFlow's default buckets.

    None when the array holds no finite value. Integers count as their float values; booleans,
    complex numbers and strings are not accepted (TypeError).
    """
    flat = np.asarray(values).reshape(-1)
    if flat.dtype.kind not in "iuf":
        raise TypeError(f"a histogram needs real numbers, not {flat.dtype}")
    limits = _DEFAULT_LIMITS
    counts = np.zeros(len(limits), dtype=np.int64)
    num = 0
    low, high, total, squares = np.inf, -np.inf, 0.0, 0.0
    for start in range(0, len(flat), _HISTOGRAM_CHUNK):
        chunk = flat[start : start + _HISTOGRAM_CHUNK].astype(np.float64)
        finite = np.isfinite(chunk)
        if not finite.all():
            chunk = chunk[finite]
        if not len(chunk):
            continue
        index = np.searchsorted(limits, chunk, side="right")
        np.minimum(index, len(limits) - 1, out=index)  # DBL_MAX itself: the last bucket
        counts += np.bincount(index, minlength=len(limits))
        num += len(chunk)
        low = min(low, float(chunk.min()))
        high = max(high, float(chunk.max()))
        total += float(chunk.sum())
        with np.errstate(over="ignore"):
            squares += float(np.dot(chunk, chunk))
    if num == 0:
        return None
    bucket_limit, bucket = _collapse_empty_runs(limits, counts)
    return Histogram(low, high, float(num), total, squares, bucket_limit, bucket)


def _collapse_empty_runs(limits: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each run of empty buckets becomes one empty bucket ending at the run's last limit."""
    empty = counts == 0
    # Keep a bucket when it is non-empty, or when it is the last of a run of empty ones.
    last_of_run = empty & np.append(~empty[1:], True)
    keep = ~empty | last_of_run
    return limits[keep].astype(np.float64), counts[keep].astype(np.float64)


# ----- encoding -----


def _event(wall_time: float, step: int, body: bytes) -> bytes:
    return (
        wire.double_field(_EVENT_WALL_TIME, wall_time) + wire.varint_field(_EVENT_STEP, step) + body
    )


def _summary_event(wall_time: float, step: int, value_body: bytes) -> bytes:
    summary = wire.message_field(_SUMMARY_VALUE, value_body)
    return _event(wall_time, step, wire.message_field(_EVENT_SUMMARY, summary))


def encode_file_version_event(wall_time: float) -> bytes:
    """The Event that opens every TensorBoard file: ``file_version = "brain.Event:2"``."""
    return _event(wall_time, 0, wire.message_field(_EVENT_FILE_VERSION, FILE_VERSION.encode()))


def encode_scalar_event(tag: str, value: float, *, step: int, wall_time: float) -> bytes:
    """An Event holding one scalar summary (``simple_value``, a 32-bit float as in TF)."""
    with np.errstate(over="ignore"):
        single = float(np.float32(value))  # beyond float32's range: infinity, as TF stores it
    simple = wire.key(_VALUE_SIMPLE_VALUE, wire.FIXED32) + _FLOAT.pack(single)
    return _summary_event(wall_time, step, wire.message_field(_VALUE_TAG, tag.encode()) + simple)


def _packed_doubles(field: int, values: np.ndarray) -> bytes:
    return wire.message_field(field, np.ascontiguousarray(values, dtype="<f8").tobytes())


def encode_histogram_event(tag: str, histogram: Histogram, *, step: int, wall_time: float) -> bytes:
    """An Event holding one histogram summary (``histo``, a HistogramProto)."""
    body = (
        wire.double_field(_HISTO_MIN, histogram.min)
        + wire.double_field(_HISTO_MAX, histogram.max)
        + wire.double_field(_HISTO_NUM, histogram.num)
        + wire.double_field(_HISTO_SUM, histogram.sum)
        + wire.double_field(_HISTO_SUM_SQUARES, histogram.sum_squares)
        + _packed_doubles(_HISTO_BUCKET_LIMIT, histogram.bucket_limit)
        + _packed_doubles(_HISTO_BUCKET, histogram.bucket)
    )
    value = wire.message_field(_VALUE_TAG, tag.encode()) + wire.message_field(_VALUE_HISTO, body)
    return _summary_event(wall_time, step, value)


def _record(payload: bytes) -> bytes:
    return b"".join(frame([payload], real_crc=True))


# ----- the log directory -----


def event_file_name(wall_time: float, hostname: str, pid: int) -> str:
    """A TensorBoard event file name: ``events.out.tfevents.<time:010>.<hostname>.<pid>``.

    The zero-padded time makes later files sort after earlier ones, as TensorBoard expects.
    """
    return f"{EVENT_FILE_PREFIX}{int(wall_time):010d}.{hostname}.{pid}"


class _ModeFile:
    """One mode's event file: created on the first record, then appended one step at a time.

    Objects cannot be appended to: in object storage the file grows in a local scratch file and
    is uploaded whole when it is closed.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path: str | None = None
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.pending_step: int | None = None
        self._file: BinaryIO | None = None
        self._scratch: str | None = None

    def _open(self) -> tuple[BinaryIO, int]:
        """The open file, created with its header record if need be, and the header's size."""
        if self._file is not None:
            return self._file, 0
        wall_time = time.time()
        name = event_file_name(wall_time, socket.gethostname(), os.getpid())
        path = os.path.join(self.directory, name)
        copy = 0
        while files.exists(path):
            copy += 1
            path = os.path.join(self.directory, f"{name}.{copy}")
        self._scratch = files.scratch_path(path)
        header = files.write_atomic(self._scratch, _record(encode_file_version_event(wall_time)))
        self._file = open(self._scratch, "ab", buffering=0)  # noqa: SIM115
        self.path = path
        return self._file, header

    def add(self, record: bytes, step: int) -> int:
        """Queue a record of ``step``; the queued records of another step are written first."""
        written = 0
        if self.pending_step is not None and step != self.pending_step:
            written = self.write_pending()
        self.pending.append(record)
        self.pending_bytes += len(record)
        self.pending_step = step
        if self.pending_bytes >= _FLUSH_BYTES:
            written += self.write_pending()
        return written

    def write_pending(self) -> int:
        """Append the queued records in one write; returns the bytes written (header included)."""
        if not self.pending:
            return 0
        data = b"".join(self.pending)
        self.pending, self.pending_bytes = [], 0
        file, header = self._open()
        start = file.tell()
        view = memoryview(data)
        try:
            while view:
                count = file.write(view)
                if not count:
                    raise OSError(f"{self.path}: the file accepts no more bytes")
                view = view[count:]
        except BaseException:
            # A failed append (a full disk) must not leave half a record behind.
            with contextlib.suppress(OSError):
                file.truncate(start)
            raise
        return header + len(data)

    def close(self) -> int:
        written = 0
        try:
            written = self.write_pending()
        finally:
            file, self._file = self._file, None
            if file is not None:
                file.close()
                if self.path is not None and self._scratch != self.path:
                    files.rename(self._scratch or "", self.path)  # uploads it
        return written


class TensorBoardWriter:
    """Writes scalar and histogram summaries into a TensorBoard log directory, a file per mode.

    Records are queued per mode and written a step at a time: when a record of a later step
    arrives, at ``flush()`` and at ``close()``. Not thread-safe: one thread owns it. Errors
    (an unwritable directory, a full disk) are raised to the caller; what is already on disk
    stays readable.
    """

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.bytes_written = 0
        self._files: dict[ModeKeys, _ModeFile] = {}

    def _mode_file(self, mode: ModeKeys) -> _ModeFile:
        found = self._files.get(mode)
        if found is None:
            found = _ModeFile(os.path.join(self.log_dir, ModeKeys(mode).name))
            self._files[mode] = found
        return found

    def paths(self) -> dict[ModeKeys, str]:
        """The event file of each mode that has one on disk so far."""
        return {mode: file.path for mode, file in self._files.items() if file.path is not None}

    def add_scalar(
        self, mode: ModeKeys, tag: str, value: float, *, step: int, wall_time: float | None = None
    ) -> None:
        """Queue a scalar summary of ``tag`` at global ``step`` in ``mode``'s file."""
        wall_time = time.time() if wall_time is None else wall_time
        payload = encode_scalar_event(tag, value, step=step, wall_time=wall_time)
        self.bytes_written += self._mode_file(mode).add(_record(payload), step)

    def add_histogram(
        self,
        mode: ModeKeys,
        tag: str,
        histogram: Histogram,
        *,
        step: int,
        wall_time: float | None = None,
    ) -> None:
        """Queue a histogram summary of ``tag`` at global ``step`` in ``mode``'s file."""
        wall_time = time.time() if wall_time is None else wall_time
        payload = encode_histogram_event(tag, histogram, step=step, wall_time=wall_time)
        self.bytes_written += self._mode_file(mode).add(_record(payload), step)

    def flush(self) -> None:
        """Write every queued record now."""
        for mode_file in self._files.values():
            self.bytes_written += mode_file.write_pending()

    def close(self) -> None:
        """Write every queued record and close the files. Safe to call more than once."""
        error: BaseException | None = None
        for mode_file in self._files.values():
            try:
                self.bytes_written += mode_file.close()
            except BaseException as failure:
                error = error or failure
        if error is not None:
            raise error
