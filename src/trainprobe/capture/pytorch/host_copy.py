"""Copies of tensors to host memory that the training thread starts and the writer thread finishes.

On CUDA the copy is asynchronous: the tensor is first snapshotted on the device (on the training
stream, so a later in-place update cannot race with the copy), then copied into pinned host memory
on a separate copy stream with ``non_blocking=True``; an event marks its end, and the writer thread
waits on that event (``wait_for_device``, which counts a wait apart from the hook's own time),
never the training thread. On the CPU the copy is a detached clone, made at once (a later in-place
update of the original cannot reach it), into a buffer reused from earlier steps once the writer
thread has written it (fresh memory costs page faults). Other devices copy synchronously.

numpy has no bfloat16: a bfloat16 tensor travels as its raw 16-bit patterns (half the bytes) and
the writer thread widens them to float32, which is exact. Other dtypes numpy lacks (float8 kinds)
are converted to float32 on the device. ``original_dtype`` tells the reader what the tensor was.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import torch

from trainprobe.capture.overhead import wait_for_device

__all__ = [
    "HOST_READS_ARE_FREE",
    "BufferPool",
    "HostCopy",
    "host_reads_are_free",
    "original_dtype_of",
    "start_copies",
    "start_copy",
    "to_host_later",
]

_NUMPY_LESS = {torch.bfloat16}
_WIDEN_TO_FLOAT32 = {
    getattr(torch, name)
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(torch, name)
}

_streams: dict[int, torch.cuda.Stream] = {}
_streams_lock = threading.Lock()

_POOLED_MIN_BYTES = 64 * 1024


class BufferPool:
    """Host buffers handed back by the writer thread, kept (up to ``max_bytes``) for reuse.

    Only buffers of at least 64 KiB are kept: smaller ones are cheap to allocate.
    """

    def __init__(self, max_bytes: int = 128 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._free: dict[tuple[tuple[int, ...], torch.dtype], list[torch.Tensor]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def take(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        """A contiguous CPU tensor of this shape and dtype (contents undefined)."""
        key = (tuple(shape), dtype)
        with self._lock:
            free = self._free.get(key)
            if free:
                buffer = free.pop()
                self._bytes -= buffer.nbytes
                return buffer
        return torch.empty(shape, dtype=dtype)

    def give(self, buffer: torch.Tensor) -> None:
        """Hand back a buffer nothing reads any more."""
        size = buffer.nbytes
        if size < _POOLED_MIN_BYTES:
            return
        with self._lock:
            if self._bytes + size > self.max_bytes:
                return
            self._free.setdefault((tuple(buffer.shape), buffer.dtype), []).append(buffer)
            self._bytes += size


_pool = BufferPool()


def original_dtype_of(tensor: torch.Tensor) -> str | None:
    """The dtype to record beside a tensor saved under another dtype, or None."""
    if tensor.dtype in _NUMPY_LESS or tensor.dtype in _WIDEN_TO_FLOAT32:
        return str(tensor.dtype).removeprefix("torch.")
    return None


def _bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    widened = bits.view(np.uint16).astype(np.uint32) << 16
    return widened.view(np.float32)


class HostCopy:
    """A tensor's content on its way to host memory (a ``PendingArray`` for the writer thread)."""

    __slots__ = ("_event", "_host", "_pool", "bfloat16", "nbytes")

    def __init__(
        self,
        host: torch.Tensor,
        *,
        event: torch.cuda.Event | None,
        bfloat16: bool,
        pool: BufferPool | None = None,
    ) -> None:
        self._host: torch.Tensor | None = host
        self._event = event
        self._pool = pool
        self.bfloat16 = bfloat16
        self.nbytes = host.numel() * host.element_size()

    @property
    def arriving(self) -> bool:
        """Whether the content may still be arriving from the device (an asynchronous copy)."""
        return self._event is not None

    def result(self) -> np.ndarray:
        """Wait for the copy (on CUDA) and return the content as a numpy array."""
        if self._host is None:
            raise ValueError("the buffer was already released")
        if self._event is not None:
            wait_for_device(self._event)  # the writer's wait; never the hook's time
        array = self._host.numpy()
        return _bfloat16_bits_to_float32(array) if self.bfloat16 else array

    def release(self) -> None:
        """The content is written: the buffer may be reused (call once nothing reads it)."""
        host, self._host = self._host, None
        if host is not None and self._pool is not None:
            self._pool.give(host)


def _copy_stream(device: torch.device) -> torch.cuda.Stream:
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _streams_lock:
        stream = _streams.get(index)
        if stream is None:
            stream = torch.cuda.Stream(device=index)  # type: ignore[no-untyped-call]
            _streams[index] = stream
        return stream


def _prepare(tensor: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """The tensor in a dtype numpy can hold (bfloat16 as its bit patterns), and whether it was."""
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16), True
    if tensor.dtype in _WIDEN_TO_FLOAT32:
        return tensor.to(torch.float32), False
    return tensor, False


def start_copy(tensor: torch.Tensor, *, snapshot: bool = True) -> HostCopy:
    """Start copying ``tensor`` to host memory; returns at once on CUDA.

    ``snapshot`` says the tensor may change after this call (a parameter the optimizer will
    update, an output an in-place op will overwrite), so its current value is copied first. Pass
    False only for a tensor nothing else holds.
    """
    source, bfloat16 = _prepare(tensor)
    if source.device.type == "cuda":
        return _start_cuda_copy(source, snapshot=snapshot, bfloat16=bfloat16)
    if source.device.type == "cpu":
        if not snapshot:
            return HostCopy(source.contiguous(), event=None, bfloat16=bfloat16)
        host = _pool.take(source.shape, source.dtype)
        host.copy_(source)
        return HostCopy(host, event=None, bfloat16=bfloat16, pool=_pool)
    return HostCopy(source.to("cpu").contiguous(), event=None, bfloat16=bfloat16)


def _start_cuda_copy(source: torch.Tensor, *, snapshot: bool, bfloat16: bool) -> HostCopy:
    if snapshot:
        source = source.clone(memory_format=torch.contiguous_format)
    host, event = _copy_to_pinned(source)
    return HostCopy(host, event=event, bfloat16=bfloat16)


def _copy_to_pinned(source: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event]:
    """``source`` copied into pinned host memory on the device's copy stream, and the event
    that marks the copy's end."""
    stream = _copy_stream(source.device)
    stream.wait_stream(torch.cuda.current_stream(source.device))
    with torch.cuda.stream(stream):
        copied = _pinned_copy(source)
    # The device buffer must outlive the copy even if the training thread drops it.
    source.record_stream(stream)
    return copied


def _pinned_copy(source: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event]:
    """``source`` copied into pinned host memory on its device's current stream without
    blocking, and the event recorded after the copy."""
    host = torch.empty(source.shape, dtype=source.dtype, pin_memory=True)
    host.copy_(source, non_blocking=True)
    event = torch.cuda.Event()  # type: ignore[no-untyped-call]
    event.record(torch.cuda.current_stream(source.device))
    return host, event


BATCH_BYTES = 1 << 28
"""The most bytes one batched copy to the host carries (``start_copies``)."""


def start_copies(tensors: Sequence[torch.Tensor]) -> list[HostCopy]:
    """Start copying each of ``tensors`` to host memory, as ``start_copy`` does; on CUDA the
    tensors of one device and dtype travel together (up to ``BATCH_BYTES``): one snapshot on the
    device into a flat buffer, one pinned host buffer, one copy, so a step launches a few copies
    whatever the number of tensors."""
    copies: list[HostCopy | None] = [None] * len(tensors)
    groups: dict[tuple[torch.device, torch.dtype], list[tuple[int, torch.Tensor, bool]]] = {}
    for index, tensor in enumerate(tensors):
        source, bfloat16 = _prepare(tensor)
        if source.device.type == "cuda":
            groups.setdefault((source.device, source.dtype), []).append((index, source, bfloat16))
        else:
            copies[index] = start_copy(tensor)
    for members in groups.values():
        for batch in _batches(members):
            for index, copy in _start_cuda_batch(batch):
                copies[index] = copy
    return [copy for copy in copies if copy is not None]


def _batches(
    members: list[tuple[int, torch.Tensor, bool]],
) -> list[list[tuple[int, torch.Tensor, bool]]]:
    batches: list[list[tuple[int, torch.Tensor, bool]]] = [[]]
    size = 0
    for member in members:
        nbytes = member[1].numel() * member[1].element_size()
        if batches[-1] and size + nbytes > BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(member)
        size += nbytes
    return batches


def _start_cuda_batch(
    members: list[tuple[int, torch.Tensor, bool]],
) -> list[tuple[int, HostCopy]]:
    if len(members) == 1:
        index, source, bfloat16 = members[0]
        return [(index, _start_cuda_copy(source, snapshot=True, bfloat16=bfloat16))]
    flat = torch._C._nn.flatten_dense_tensors([source for _, source, _ in members])
    host, event = _copy_to_pinned(flat)
    copies, offset = [], 0
    for index, source, bfloat16 in members:
        count = source.numel()
        part = host[offset : offset + count].view(source.shape)
        copies.append((index, HostCopy(part, event=event, bfloat16=bfloat16)))
        offset += count
    return copies


HOST_READS_ARE_FREE = {"cpu"}
"""Device types whose values the host reads without waiting for the device."""


def host_reads_are_free(device: torch.device) -> bool:
    """Whether reading a value of ``device`` on the host costs no wait for the device."""
    return device.type in HOST_READS_ARE_FREE


def to_host_later(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event | None]:
    """``tensor`` on its way to the host without blocking, and the event that says it arrived
    (None: it is readable now)."""
    if tensor.device.type != "cuda":
        return tensor, None
    return _pinned_copy(tensor)
