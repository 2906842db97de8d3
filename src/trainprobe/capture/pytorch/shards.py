"""What one rank holds of a sharded tensor, and where that piece lies in the full tensor.

In a sharded training the parameters and gradients are ``DTensor``s: FSDP2's ``fully_shard``
splits each along its first dimension over the ranks, tensor parallelism
(``parallelize_module``) along a row or a column, and a 2-D mesh does both (HSDP, FSDP with
tensor parallelism). Along each dimension of its device mesh a tensor is ``Shard(dim)`` (each
rank a slice), ``Replicate()`` (each rank the same values) or ``Partial()`` (each rank a term
of a sum: tensor parallelism's gradients of a sequence-parallel norm).

``piece_of`` gives the rank's local tensor and a ``Piece``: the full tensor's shape, where the
local tensor lies in it, whether this rank writes it (one replica of each piece does), which
ranks' pieces make one copy of the full tensor (what its reductions are combined over) and how
many ranks hold this same piece (what its share of a global sum is divided by). Nothing is
gathered; a description is made once per mesh, placements and shape.
"""

from __future__ import annotations

import functools
import logging
import math
import sys
from dataclasses import dataclass

import torch

from trainprobe.storage.index_file import ShardEntry

__all__ = ["Piece", "has_pieces", "is_sharded", "piece_of"]

log = logging.getLogger("trainprobe")


def _dtensor() -> type[torch.Tensor] | None:
    """``DTensor``, once the training has imported it (none of its tensors can be one before:
    importing it here would cost every training that shards nothing)."""
    module = sys.modules.get("torch.distributed.tensor")
    return None if module is None else module.DTensor  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Piece:
    """This rank's piece of a sharded tensor (see the module docstring)."""

    shape: tuple[int, ...]
    """The full tensor's shape."""
    offsets: tuple[int, ...]
    """Where the piece starts along each dimension of the full tensor."""
    summed: bool
    """Whether the full tensor is the sum of the pieces of ``ranks`` (a ``Partial`` placement)."""
    writes: bool
    """Whether this rank writes the piece (the first of its replicas)."""
    ranks: tuple[int, ...]
    """The global ranks whose pieces make one copy of the full tensor."""
    copies: int
    """How many ranks hold this same piece (its replicas, this one included)."""
    combinable: bool = True
    """Whether the full tensor's reductions can be combined from the pieces' (a sum of pieces
    that are also split cannot: its pieces do not line up)."""

    def entry(self, name: str) -> ShardEntry:
        """The index's record of this piece, saved under ``name``."""
        return ShardEntry(name, self.shape, self.offsets, summed=self.summed)


def is_sharded(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a ``DTensor`` (one rank's view of a sharded tensor)."""
    kind = _dtensor()
    return kind is not None and isinstance(tensor, kind)


def has_pieces(tensors: list[torch.Tensor]) -> bool:
    """Whether any of ``tensors`` is sharded."""
    kind = _dtensor()
    return kind is not None and any(isinstance(tensor, kind) for tensor in tensors)


def piece_of(tensor: torch.Tensor) -> tuple[torch.Tensor, Piece | None]:
    """The local tensor of a sharded ``tensor`` and its ``Piece``; ``(tensor, None)`` for an
    ordinary one. A placement the trial cannot put together (a ``Partial`` other than a sum)
    gives ``(local, None)``, said once in the log."""
    if not is_sharded(tensor):
        return tensor, None
    with torch.no_grad():  # the local tensor itself, not a view that tracks gradients
        local = tensor.to_local()  # type: ignore[attr-defined]
    mesh, placements = tensor.device_mesh, tuple(tensor.placements)  # type: ignore[attr-defined]
    return local, _describe(mesh, placements, tuple(tensor.shape))


@functools.lru_cache(maxsize=4096)
def _describe(mesh: object, placements: tuple[object, ...], shape: tuple[int, ...]) -> Piece | None:
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    device_mesh = mesh  # a DeviceMesh: hashable, kept alive by the cache as long as it is used
    sizes = tuple(int(size) for size in device_mesh.mesh.shape)  # type: ignore[attr-defined]
    replicated, summed = [], []
    for dimension, placement in enumerate(placements):
        if placement.is_replicate():  # type: ignore[attr-defined]
            replicated.append(dimension)
        elif placement.is_partial():  # type: ignore[attr-defined]
            if getattr(placement, "reduce_op", "sum") != "sum":
                log.warning(
                    "trainprobe: a tensor of shape %s is a partial %s over its mesh; such "
                    "tensors are saved as each rank's own term",
                    list(shape),
                    getattr(placement, "reduce_op", "reduction"),
                )
                return None
            summed.append(dimension)
    split = len(placements) - len(replicated) - len(summed)
    _, offsets = compute_local_shape_and_global_offset(shape, device_mesh, placements)  # type: ignore[arg-type]
    coordinate = device_mesh.get_coordinate()  # type: ignore[attr-defined]
    writes = coordinate is not None and all(coordinate[d] == 0 for d in replicated)
    first_replica = device_mesh.mesh  # type: ignore[attr-defined]
    for dimension in sorted(replicated, reverse=True):
        first_replica = first_replica.select(dimension, 0)
    return Piece(
        shape=shape,
        offsets=tuple(int(offset) for offset in offsets),
        summed=bool(summed),
        writes=writes,
        ranks=tuple(int(rank) for rank in first_replica.reshape(-1).tolist()),
        copies=math.prod(sizes[d] for d in replicated),
        combinable=not (summed and split),
    )
