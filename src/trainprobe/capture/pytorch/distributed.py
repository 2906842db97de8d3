"""Which worker this process is in a distributed run, as smdebug names workers.

The rank and world size come from ``torch.distributed`` when it is initialised, otherwise from
the ``RANK``/``WORLD_SIZE`` variables ``torchrun`` sets (so that processes never write over each
other's files even before the process group exists), otherwise the process is the only worker.
The worker's files are named ``worker_<rank>``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from trainprobe import settings

__all__ = ["CHIEF", "Worker", "this_worker"]

CHIEF = "worker_0"


@dataclass(frozen=True)
class Worker:
    """This process's place in the run."""

    rank: int
    world_size: int

    @property
    def name(self) -> str:
        """The name in this worker's file names: ``worker_<rank>``."""
        return f"worker_{self.rank}"

    @property
    def is_chief(self) -> bool:
        """Whether this is rank 0, the worker that writes when only one does."""
        return self.rank == 0


def this_worker() -> Worker:
    """This process's rank and the number of workers."""
    if dist.is_available() and dist.is_initialized():
        return Worker(dist.get_rank(), dist.get_world_size())
    rank, size = settings.RANK.get(), settings.WORLD_SIZE.get()
    if rank is not None and size is not None and size > 1:
        return Worker(rank, size)
    return Worker(0, 1)
