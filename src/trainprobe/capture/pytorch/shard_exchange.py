"""The one exchange between ranks at a save step of a sharded training, off the training thread.

A sharded tensor's reductions are the full tensor's, combined from every rank's piece: each
rank computes its pieces' partial results (sums, sums of squares, extremes, counts) in the
hook's batched pass, and the ranks swap them in one ``all_gather`` of a small vector a save
step. The swap runs on the writer's thread, in step order, over a process group of the hook's
own (gloo, on host memory): the training's collectives and its thread never wait on it, and a
step that saves nothing exchanges nothing.

Before the vector goes, a header of three numbers (the step, the vector's length, a checksum of
what it holds) is gathered: gloo ends the process when ranks send vectors of different lengths,
so the vector travels only when every rank's header agrees. A rank whose hook stopped (its
writer failed) stops exchanging; the others' next exchange then times out
(``EXCHANGE_TIMEOUT_SECONDS``) and their saving stops too, each logged, the training unharmed.

The group is made when the hook registers a sharded model: every rank registers it at the same
point of the training, as a process group must be made. ``torch.distributed``'s
``destroy_process_group`` first lets every writer with an exchange finish what it holds.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from trainprobe.errors import CaptureError

__all__ = ["EXCHANGE_TIMEOUT_SECONDS", "ShardExchange", "ShardExchangeError", "layout_checksum"]

EXCHANGE_TIMEOUT_SECONDS = 300.0
"""How long a rank's writer waits for the others at an exchange before its saving stops."""


class ShardExchangeError(CaptureError):
    """The ranks of a sharded training could not swap a save step's partial results."""


def layout_checksum(parts: Sequence[str]) -> int:
    """A checksum of what an exchanged vector holds (names and reductions), the same on every
    rank that holds the same (``hash`` is not: it differs between processes)."""
    return zlib.crc32("\n".join(parts).encode())


class ShardExchange:
    """The hook's process group over every rank, and the exchange of a save step's vector."""

    def __init__(self, group: Any, rank: int, world_size: int) -> None:
        self.group = group
        self.rank = rank
        self.world_size = world_size
        self.exchanges = 0
        """How many exchanges were made (each: one header, one vector)."""

    @classmethod
    def create(cls, flush: Callable[[], None]) -> ShardExchange:
        """The exchange of this process (a collective: every rank makes it at the same point);
        ``flush`` is called before the training's process group is destroyed."""
        timeout = datetime.timedelta(seconds=EXCHANGE_TIMEOUT_SECONDS)
        group = dist.new_group(backend="gloo", timeout=timeout)
        _before_destroy(flush)
        return cls(group, dist.get_rank(), dist.get_world_size())

    def gather(self, step: int, vector: np.ndarray, checksum: int) -> np.ndarray:
        """Every rank's ``vector`` of ``step`` by rank (a ``(world size, len)`` array), once
        every rank's step, length and ``checksum`` agree; ShardExchangeError otherwise."""
        if not dist.is_initialized():
            raise ShardExchangeError(
                f"step {step}: the process group was destroyed before this step's sharded "
                "tensors could be combined"
            )
        header = torch.tensor(
            [float(step), float(vector.size), float(checksum)], dtype=torch.float64
        )
        headers = torch.empty(self.world_size * 3, dtype=torch.float64)
        dist.all_gather_single(headers, header, group=self.group)
        rows = headers.reshape(self.world_size, 3)
        if not bool((rows == header).all()):
            raise ShardExchangeError(
                f"step {step}: the ranks hold different sharded tensors to combine "
                f"(step, length, checksum by rank: {rows.tolist()}); a rank's hook may have "
                "stopped, or the ranks save different collections"
            )
        local = torch.from_numpy(np.ascontiguousarray(vector, dtype=np.float64))
        gathered = torch.empty(self.world_size * vector.size, dtype=torch.float64)
        dist.all_gather_single(gathered, local, group=self.group)
        self.exchanges += 1
        return gathered.reshape(self.world_size, vector.size).numpy()


_flushes: list[Callable[[], None]] = []
_patch_lock = threading.Lock()


def _before_destroy(flush: Callable[[], None]) -> None:
    """Have ``flush`` called before ``torch.distributed.destroy_process_group`` runs."""
    with _patch_lock:
        _flushes.append(flush)
        if len(_flushes) > 1:
            return
        original = dist.destroy_process_group

        @functools.wraps(original)
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            with _patch_lock:
                waiting = list(_flushes)
            for wait in waiting:
                with contextlib.suppress(Exception):  # the training's own call must go through
                    wait()
            return original(*args, **kwargs)

        dist.destroy_process_group = destroy_process_group
