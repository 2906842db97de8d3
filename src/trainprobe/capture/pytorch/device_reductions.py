"""Reductions of tensors computed where the tensors live, gathered into one buffer per step.

The device computes only the few passes over the data the requested reductions need
(``device_passes``: batched over many tensors on a GPU). Everything else is derived from those on
the host, by the writer thread: ``mean`` is the sum over the count, ``std`` the root of the
variance, ``abs_max`` the larger magnitude of min and max, ``abs_sum``/``abs_l1`` the l1 norm,
``abs_mean`` the l1 norm over the count, ``abs_l2`` the l2 norm and ``abs_prod`` the magnitude
of the product. A sharded tensor's pieces are reduced apart (``shard_reductions``): their
partial results travel in the same buffer and are combined into the full tensor's reductions
on the host, once the ranks have swapped them.

Nothing is read back while the step runs: the results stay on the device until the step ends,
when they are gathered into one float64 tensor and copied to the host in one go; the writer
thread waits for that copy, derives the reductions and writes them.

Passes run in float32 (float64 for float64 and 32/64-bit integer tensors, which float32 cannot
hold exactly); reductions are saved as float32, or float64 for those wide tensors (and for
fingerprints). ``std`` and ``variance`` are population statistics (divided by n), as numpy and
the trial's read side compute them from a raw tensor. (smdebug's PyTorch hook divided by
n - 1.)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from trainprobe.capture.pytorch.device_passes import (
    DERIVE,
    FINGERPRINT,
    Op,
    layout,
    reduce_group,
    saved_dtype,
)
from trainprobe.capture.pytorch.host_copy import HostCopy, start_copy
from trainprobe.capture.pytorch.shard_exchange import ShardExchange
from trainprobe.capture.pytorch.shard_reductions import ShardedPlan, ShardedReductions
from trainprobe.capture.pytorch.shards import Piece

__all__ = ["DerivedScalars", "ReductionBatch", "ShardedPart"]


@dataclass(frozen=True)
class ShardedPart:
    """Where a step's sharded partial results lie in its buffer, and how they are combined."""

    start: int
    end: int
    plan: ShardedPlan
    exchange: ShardExchange | None
    step: int


@dataclass(slots=True)
class _Block:
    """The tensors reduced together by one ``ReductionBatch.add``: where each one's pass
    results start in the step's buffer (``offsets`` place each pass after that), how many values
    each has, and the reductions to derive for each, in order."""

    ops: tuple[Op, ...]
    passes: tuple[str, ...]
    offsets: tuple[int, ...]
    starts: npt.NDArray[np.int64]
    counts: npt.NDArray[np.float64]


class DerivedScalars:
    """The step's reduction values, derived on the host from the pass results once they arrive
    (a few numpy operations a block of tensors, whatever their number)."""

    def __init__(
        self,
        copy: HostCopy,
        blocks: Sequence[_Block],
        scalar_positions: Sequence[int],
        sharded: ShardedPart | None = None,
    ) -> None:
        self._copy = copy
        self._blocks = blocks
        self._scalar_positions = np.asarray(scalar_positions, dtype=np.int64)
        self._sharded = sharded
        self.nbytes = copy.nbytes

    def result(self) -> np.ndarray:
        """Every reduction, in the order of their names, as float64."""
        flat = self._copy.result().astype(np.float64, copy=False)
        parts: list[np.ndarray] = []
        for block in self._blocks:
            found: dict[str, np.ndarray] = {}
            for name, offset in zip(block.passes, block.offsets, strict=True):
                at = block.starts + offset
                if name == "minmax":
                    found["min"], found["max"] = flat[at], flat[at + 1]
                else:
                    found[name] = flat[at]
            columns = [DERIVE[op](found, block.counts) for op in block.ops]
            parts.append(np.stack(columns, axis=1).reshape(-1))  # each tensor's in turn
        sharded = self._sharded
        if sharded is not None:  # swapped with the other ranks' here, on the writer's side
            local = flat[sharded.start : sharded.end]
            parts.append(sharded.plan.combine(local, sharded.exchange, sharded.step))
        parts.append(flat[self._scalar_positions])
        return np.concatenate(parts)


_KEPT_DTYPES = (torch.float32, torch.float64)
"""The dtypes a step's results are kept in until they are laid end to end (in the wider of
them, when both are there): float32 holds a float32 pass exactly, float64 the rest."""


class ReductionBatch:
    """The reductions of one step: names, saved dtypes, and pass results still on the device."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.dtypes: list[str] = []
        self._blocks: list[_Block] = []
        self._scalar_names: list[str] = []
        self._scalar_dtypes: list[str] = []
        self._scalar_positions: list[int] = []
        self._results: list[torch.Tensor] = []  # 1-D, in the order of their positions
        self._size = 0
        self._sharded = ShardedReductions()

    def add(
        self,
        reduction_names: Sequence[Sequence[str]],
        tensors: Sequence[torch.Tensor],
        ops: Sequence[Op],
    ) -> None:
        """Reduce ``tensors`` by ``ops`` now (a later in-place update cannot reach the result);
        ``reduction_names[i][j]`` names op j of tensor i. The tensors must not be empty."""
        if not tensors:
            return
        ops = tuple(ops)
        passes, offsets, width = layout(ops)
        kinds = [(tensor.device, tensor.dtype) for tensor in tensors]
        groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        if kinds.count(kinds[0]) == len(kinds):  # the usual batch: one device, one dtype
            groups[kinds[0]] = list(range(len(tensors)))
        else:
            for index, kind in enumerate(kinds):
                groups.setdefault(kind, []).append(index)
        starts = [0] * len(tensors)
        sizes = [tensor.numel() for tensor in tensors]
        for members in groups.values():
            group = [tensors[i] for i in members]
            with torch.no_grad():
                results = reduce_group(group, [sizes[i] for i in members], passes)
            for row, index in enumerate(members):
                starts[index] = self._size + row * width
            self._keep(results)
        self._blocks.append(
            _Block(
                ops,
                passes,
                offsets,
                np.asarray(starts, dtype=np.int64),
                np.asarray(sizes, dtype=np.float64),
            )
        )
        self.names.extend(itertools.chain.from_iterable(reduction_names))
        if ops == (FINGERPRINT,):
            self.dtypes += ["float64"] * len(tensors)
        elif len(groups) == 1:
            self.dtypes += [saved_dtype(kinds[0][1])] * (len(tensors) * len(ops))
        else:
            saved = {dtype: saved_dtype(dtype) for _, dtype in groups}
            self.dtypes.extend(saved[dtype] for _, dtype in kinds for _ in ops)

    def add_sharded(
        self,
        reduction_names: Sequence[Sequence[str]],
        tensors: Sequence[torch.Tensor],
        pieces: Sequence[Piece],
        ops: Sequence[Op],
    ) -> None:
        """Reduce the local ``tensors``, ``pieces`` of sharded tensors, by ``ops``: the full
        tensors' reductions, once combined with the other ranks' pieces (see the module
        docstring)."""
        if tensors:
            self._sharded.add(reduction_names, tensors, pieces, tuple(ops))

    def add_value(self, name: str, dtype: str, value: torch.Tensor) -> None:
        """Add a value already computed (a scalar saved by the user)."""
        self._scalar_names.append(name)
        self._scalar_dtypes.append(dtype)
        self._scalar_positions.append(self._size)
        self._keep(value.detach().reshape(1))

    def _keep(self, results: torch.Tensor) -> None:
        if results.dtype not in _KEPT_DTYPES:  # a value saved by the user
            results = results.double()
        self._results.append(results)
        self._size += results.numel()

    def __bool__(self) -> bool:
        return bool(self.names or self._scalar_names or self._sharded)

    def finish(
        self, step: int = -1, exchange: ShardExchange | None = None
    ) -> tuple[list[str], list[str], DerivedScalars]:
        """Names, dtypes and values of every reduction and scalar, values on their way to the host.

        One concatenation, one copy; no synchronisation here. A sharded tensor's partial
        results ride in the same buffer; they are swapped with the other ranks' through
        ``exchange`` (at ``step``) when the values are derived, on the writer's side.
        """
        parts = list(self._results)
        sharded_part = None
        names, dtypes = list(self.names), list(self.dtypes)
        if self._sharded:
            vector, plan = self._sharded.finish(parts[0].device if parts else None)
            sharded_part = ShardedPart(
                self._size, self._size + vector.numel(), plan, exchange, step
            )
            parts.append(vector)
            names += self._sharded.names
            dtypes += self._sharded.dtypes
        if len({part.device for part in parts}) > 1:
            parts = [part.to("cpu") for part in parts]
        buffer = torch.cat(parts) if len(parts) > 1 else parts[0]
        derived = DerivedScalars(
            start_copy(buffer, snapshot=False), self._blocks, self._scalar_positions, sharded_part
        )
        return names + self._scalar_names, dtypes + self._scalar_dtypes, derived
