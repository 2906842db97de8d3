"""Reductions of sharded tensors: the full tensor's, combined from every rank's piece.

A rank holds a piece of a sharded tensor (``shards``). Its reductions are computed in two
halves, neither of which gathers the tensor:

- on the device, in the hook's batched pass, each piece's partial results: the passes its
  reductions need (``device_passes``), its count of values, and, where a variance is asked for,
  its sum (of magnitudes, for the variance of absolute values) too. A piece that is a term of a
  sum (a ``Partial`` gradient of tensor parallelism, small: a norm's weight or bias) gives its
  values instead, since extremes and norms of a sum do not follow from its terms';
- on the host, once the ranks have swapped those vectors (``shard_exchange``, one exchange a
  save step, on the writer's thread): minima and maxima of the pieces', sums summed, l2 norms
  as the root of the summed squares, products multiplied, variances pooled (Chan's formula
  from each piece's count, mean and variance), and the sums of terms reduced as a whole.

Every rank so writes the same reductions, the full tensor's, under the tensor's own name. A
piece with no values (more ranks than rows) takes part with a count of 0.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from trainprobe.capture.pytorch.device_passes import (
    DERIVE,
    Op,
    in_pass_order,
    passes_for,
    reduce_group,
    saved_dtype,
)
from trainprobe.capture.pytorch.shard_exchange import ShardExchange, layout_checksum
from trainprobe.capture.pytorch.shards import Piece

__all__ = ["ShardedPlan", "ShardedReductions"]

log = logging.getLogger("trainprobe")

_WIDTHS = {"minmax": 2}
_EMPTY = {
    "minmax": (np.inf, -np.inf),
    "sum": (0.0,),
    "l1": (0.0,),
    "l2": (0.0,),
    "prod": (1.0,),
    "var": (0.0,),
    "absmin": (np.inf,),
    "absvar": (0.0,),
}
"""What a piece with no values contributes to each pass (nothing, once combined)."""


def combined_passes(ops: tuple[Op, ...]) -> tuple[str, ...]:
    """The passes a piece's reductions ``ops`` need to be combined with other pieces'."""
    wanted = set(passes_for(ops))
    if "var" in wanted:
        wanted.add("sum")
    if "absvar" in wanted:
        wanted.add("l1")
    return in_pass_order(wanted)


@dataclass(frozen=True)
class _Block:
    """Pieces reduced together: where their results start in the vector, what they are."""

    start: int
    ops: tuple[Op, ...]
    passes: tuple[str, ...]
    pieces: tuple[Piece, ...]
    summed: bool
    """Whether the pieces are terms of sums (their values travel, not their passes)."""

    @property
    def width(self) -> int:
        """How many numbers one piece of a block that is not summed takes (passes, count)."""
        return sum(_WIDTHS.get(name, 1) for name in self.passes) + 1


class ShardedReductions:
    """A step's reductions of sharded tensors, their partial results still on the device."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.dtypes: list[str] = []
        self._blocks: list[_Block] = []
        self._parts: list[torch.Tensor] = []
        self._layout: list[str] = []
        self._size = 0
        self._said: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.names)

    def add(
        self,
        reduction_names: Sequence[Sequence[str]],
        tensors: Sequence[torch.Tensor],
        pieces: Sequence[Piece],
        ops: tuple[Op, ...],
    ) -> None:
        """Reduce the local ``tensors`` (``pieces`` of sharded tensors) by ``ops`` now;
        ``reduction_names[i][j]`` names op j of tensor i."""
        kept = [i for i, piece in enumerate(pieces) if self._combinable(piece, reduction_names[i])]
        for summed in (False, True):
            members = [i for i in kept if pieces[i].summed is summed]
            if not members:
                continue
            group = [tensors[i] for i in members]
            passes = combined_passes(ops)
            block = _Block(self._size, ops, passes, tuple(pieces[i] for i in members), summed)
            with torch.no_grad():
                vector = _values(group) if summed else _partials(group, passes, block.width)
            self._blocks.append(block)
            self._parts.append(vector)
            self._size += vector.numel()
            for i in members:
                self.names.extend(reduction_names[i])
                self.dtypes += [saved_dtype(tensors[i].dtype)] * len(ops)
                self._layout.append(f"{'|'.join(reduction_names[i])}:{pieces[i].shape}")

    def _combinable(self, piece: Piece, names: Sequence[str]) -> bool:
        if piece.combinable:
            return True
        if names and names[0] not in self._said:
            self._said.add(names[0])
            log.warning(
                "trainprobe: %s is a sum of pieces that are split too; its reductions are not "
                "saved (its pieces are)",
                names[0],
            )
        return False

    def finish(self, device: torch.device | None) -> tuple[torch.Tensor, ShardedPlan]:
        """The partial results as one float64 vector on ``device`` (None: where they are), and
        how to combine them."""
        where = self._parts[0].device if device is None else device
        parts = [part.to(where) for part in self._parts]
        vector = torch.cat(parts) if len(parts) > 1 else parts[0]
        return vector, ShardedPlan(tuple(self._blocks), layout_checksum(self._layout))


def _partials(tensors: list[torch.Tensor], passes: tuple[str, ...], width: int) -> torch.Tensor:
    """Each piece's pass results and count, one row of ``width`` numbers a piece, flat."""
    sizes = [tensor.numel() for tensor in tensors]
    filled = [i for i, size in enumerate(sizes) if size]
    device = tensors[0].device
    empty = [value for name in passes for value in _EMPTY[name]] + [0.0]
    rows = torch.tensor([empty] * len(tensors), dtype=torch.float64, device=device)
    if filled:
        found = reduce_group([tensors[i] for i in filled], [sizes[i] for i in filled], passes)
        values = found.to(torch.float64).reshape(len(filled), width - 1)
        counts = torch.tensor([float(sizes[i]) for i in filled], dtype=torch.float64)
        index = torch.tensor(filled, device=device)
        rows[index] = torch.cat([values, counts.to(device).reshape(-1, 1)], dim=1)
    return rows.reshape(-1)


def _values(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The pieces' values laid end to end, in float64."""
    return torch.cat([tensor.reshape(-1).to(torch.float64) for tensor in tensors])


@dataclass(frozen=True)
class ShardedPlan:
    """How a step's exchanged partial results become the full tensors' reductions (on the
    host, on the writer's thread)."""

    blocks: tuple[_Block, ...]
    checksum: int

    def combine(self, local: np.ndarray, exchange: ShardExchange | None, step: int) -> np.ndarray:
        """The reductions, in the order of their names, from this rank's ``local`` vector and
        the other ranks' (swapped through ``exchange``; None in a training of one process)."""
        if exchange is None:
            gathered = local.reshape(1, -1)
        else:
            gathered = exchange.gather(step, local, self.checksum)
        parts = [_combine(block, gathered) for block in self.blocks]
        return np.concatenate(parts) if parts else np.empty(0)


def _combine(block: _Block, gathered: np.ndarray) -> np.ndarray:
    """The reductions of ``block``'s tensors (each one's in turn) from every rank's vector."""
    if block.summed:
        return _combine_sums(block, gathered)
    width = block.width
    rows = gathered[:, block.start : block.start + width * len(block.pieces)]
    rows = rows.reshape(gathered.shape[0], len(block.pieces), width)
    results = []
    for index, piece in enumerate(block.pieces):
        mine = rows[list(piece.ranks), index, :]  # (ranks, width): one copy's pieces
        found, count = _pooled(mine, block.passes)
        results.append([float(DERIVE[op](found, count)) for op in block.ops])
    return np.asarray(results, dtype=np.float64).reshape(-1)


def _pooled(rows: np.ndarray, passes: tuple[str, ...]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The full tensor's pass results from its pieces' ``rows``, and its count of values."""
    counts = rows[:, -1]
    total = np.asarray(counts.sum())
    found: dict[str, np.ndarray] = {}
    column = 0
    for name in passes:
        values = rows[:, column]
        if name == "minmax":
            found["min"] = np.asarray(values.min())
            found["max"] = np.asarray(rows[:, column + 1].max())
        elif name in ("sum", "l1"):
            found[name] = np.asarray(values.sum())
        elif name == "l2":
            found[name] = np.asarray(np.sqrt(np.square(values).sum()))
        elif name == "prod":
            found[name] = np.asarray(values.prod())
        elif name == "absmin":
            found[name] = np.asarray(values.min())
        column += _WIDTHS.get(name, 1)
    column = 0
    for name in passes:
        if name in ("var", "absvar"):
            sums = rows[:, _column_of(passes, "sum" if name == "var" else "l1")]
            found[name] = _pooled_variance(counts, sums, rows[:, column], total)
        column += _WIDTHS.get(name, 1)
    return found, total


def _column_of(passes: tuple[str, ...], wanted: str) -> int:
    column = 0
    for name in passes:
        if name == wanted:
            return column
        column += _WIDTHS.get(name, 1)
    raise ValueError(f"pass {wanted!r} is not among {passes}")


def _pooled_variance(
    counts: np.ndarray, sums: np.ndarray, variances: np.ndarray, total: np.ndarray
) -> np.ndarray:
    """The population variance of pieces of ``counts`` values with ``sums`` and population
    ``variances`` (Chan et al.'s pooling: within-piece spread plus that of the pieces' means)."""
    if total == 0:
        return np.asarray(np.nan)
    filled = counts > 0
    means = np.where(filled, sums / np.where(filled, counts, 1.0), 0.0)
    mean = sums.sum() / total
    spread = counts * (np.where(filled, variances, 0.0) + np.square(means - mean))
    return np.asarray(spread.sum() / total)


def _combine_sums(block: _Block, gathered: np.ndarray) -> np.ndarray:
    """The reductions of tensors that are sums of the ranks' pieces, from the pieces' values."""
    results = []
    start = block.start
    for piece in block.pieces:
        size = int(np.prod(piece.shape))
        full = gathered[list(piece.ranks), start : start + size].sum(axis=0)
        start += size
        found = _passes_of(full, block.passes)
        results.append([float(DERIVE[op](found, np.asarray(float(size)))) for op in block.ops])
    return np.asarray(results, dtype=np.float64).reshape(-1)


def _passes_of(values: np.ndarray, passes: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The pass results of a whole tensor's ``values``, on the host."""
    found: dict[str, np.ndarray] = {}
    magnitudes = np.abs(values)
    for name in passes:
        if name == "minmax":
            found["min"], found["max"] = np.asarray(values.min()), np.asarray(values.max())
        elif name == "sum":
            found[name] = np.asarray(values.sum())
        elif name == "l1":
            found[name] = np.asarray(magnitudes.sum())
        elif name == "l2":
            found[name] = np.asarray(np.sqrt(np.square(values).sum()))
        elif name == "prod":
            found[name] = np.asarray(values.prod())
        elif name == "var":
            found[name] = np.asarray(values.var())
        elif name == "absmin":
            found[name] = np.asarray(magnitudes.min())
        elif name == "absvar":
            found[name] = np.asarray(magnitudes.var())
    return found
