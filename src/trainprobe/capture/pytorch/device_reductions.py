"""Reductions of tensors computed where the tensors live, gathered into one buffer per step.

The device computes only the few passes over the data the requested reductions need, each at
most once per tensor: ``aminmax`` (min and max together), ``sum``, the l1 and l2 norms, ``prod``,
the population variance, and, only when asked for, the minimum and variance of the absolute
values. Everything else is derived from those on the host, by the writer thread: ``mean`` is the
sum over the count, ``std`` the root of the variance, ``abs_max`` the larger magnitude of min and
max, ``abs_sum``/``abs_l1`` the l1 norm, ``abs_mean`` the l1 norm over the count, ``abs_l2`` the
l2 norm and ``abs_prod`` the magnitude of the product. Tensors that share a device, a dtype and
the requested reductions have their norms taken together (``torch._foreach_norm``).

Nothing is read back while the step runs: the results stay on the device as 0-d tensors until the
step ends, when they are stacked into one float64 tensor and copied to the host in one go; the
writer thread waits for that copy, derives the reductions and writes them.

Passes run in float32 (float64 for float64 and 32/64-bit integer tensors, which float32 cannot
hold exactly); reductions are saved as float32, or float64 for those wide tensors. ``std`` and
``variance`` are population statistics (divided by n), as numpy and the trial's read side
compute them from a raw tensor. (smdebug's PyTorch hook divided by n - 1.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from trainprobe.capture.pytorch.host_copy import HostCopy, start_copy

__all__ = ["DerivedScalars", "ReductionBatch", "passes_for", "saved_dtype"]

Op = tuple[str, bool]

# The passes over the data each reduction needs; "minmax" yields two values (min, max).
_NEEDS: dict[Op, str] = {
    ("min", False): "minmax",
    ("max", False): "minmax",
    ("sum", False): "sum",
    ("mean", False): "sum",
    ("prod", False): "prod",
    ("std", False): "var",
    ("variance", False): "var",
    ("l1", False): "l1",
    ("l2", False): "l2",
    ("min", True): "absmin",
    ("max", True): "minmax",
    ("sum", True): "l1",
    ("mean", True): "l1",
    ("prod", True): "prod",
    ("std", True): "absvar",
    ("variance", True): "absvar",
    ("l1", True): "l1",
    ("l2", True): "l2",
}
_ORDER = ("minmax", "sum", "l1", "l2", "prod", "var", "absmin", "absvar")
_WIDTH = {"minmax": 2}

Derive = Callable[[dict[str, float], int], float]
_DERIVE: dict[Op, Derive] = {
    ("min", False): lambda p, n: p["min"],
    ("max", False): lambda p, n: p["max"],
    ("sum", False): lambda p, n: p["sum"],
    ("mean", False): lambda p, n: p["sum"] / n,
    ("prod", False): lambda p, n: p["prod"],
    ("std", False): lambda p, n: math.sqrt(max(p["var"], 0.0)),
    ("variance", False): lambda p, n: p["var"],
    ("l1", False): lambda p, n: p["l1"],
    ("l2", False): lambda p, n: p["l2"],
    ("min", True): lambda p, n: p["absmin"],
    ("max", True): lambda p, n: max(abs(p["min"]), abs(p["max"])),
    ("sum", True): lambda p, n: p["l1"],
    ("mean", True): lambda p, n: p["l1"] / n,
    ("prod", True): lambda p, n: abs(p["prod"]),
    ("std", True): lambda p, n: math.sqrt(max(p["absvar"], 0.0)),
    ("variance", True): lambda p, n: p["absvar"],
    ("l1", True): lambda p, n: p["l1"],
    ("l2", True): lambda p, n: p["l2"],
}


@functools.lru_cache(maxsize=256)
def passes_for(ops: tuple[Op, ...]) -> tuple[str, ...]:
    """The passes over the data that reductions ``ops`` need, in a fixed order."""
    wanted = {_NEEDS[op] for op in ops}
    return tuple(name for name in _ORDER if name in wanted)


@functools.lru_cache(maxsize=256)
def _layout(ops: tuple[Op, ...]) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]:
    """The passes ``ops`` need, where each pass's results start among a tensor's results, and
    which norm orders the passes take (those are batched over tensors)."""
    passes = passes_for(ops)
    offsets, cursor = [], 0
    for name in passes:
        offsets.append(cursor)
        cursor += _WIDTH.get(name, 1)
    orders = tuple(order for name, order in (("l1", 1), ("l2", 2)) if name in passes)
    return passes, tuple(offsets), orders


def _accumulate_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.float64 or dtype in (torch.int64, torch.int32):
        return torch.float64
    return torch.float32


def saved_dtype(dtype: torch.dtype) -> str:
    """The numpy dtype a reduction of a tensor of ``dtype`` is saved as."""
    return "float64" if _accumulate_dtype(dtype) == torch.float64 else "float32"


def _run_pass(name: str, x: torch.Tensor, norms: dict[int, torch.Tensor]) -> list[torch.Tensor]:
    if name == "minmax":
        low, high = torch.aminmax(x)
        return [low, high]
    if name == "sum":
        return [x.sum()]
    if name in ("l1", "l2"):
        order = 1 if name == "l1" else 2
        found = norms.get(order)
        return [found if found is not None else torch.linalg.vector_norm(x, order)]
    if name == "prod":
        return [x.prod()]
    if name == "var":
        return [x.var(correction=0)]
    if name == "absmin":
        return [x.abs().amin()]
    if name == "absvar":
        return [x.abs().var(correction=0)]
    raise ValueError(f"unknown pass {name!r}")


@dataclass(frozen=True)
class _Entry:
    """Where one tensor's pass results sit, and what to derive from them.

    The results start at ``first`` among the step's results of ``dtype`` (and so at a known
    place in the step's buffer); ``offsets`` place each pass's results relative to that start.
    """

    names: Sequence[str]
    ops: Sequence[Op]
    passes: tuple[str, ...]
    offsets: tuple[int, ...]
    count: int
    dtype: torch.dtype
    first: int


class DerivedScalars:
    """The step's reduction values, derived on the host from the pass results once they arrive."""

    def __init__(
        self,
        copy: HostCopy,
        entries: Sequence[_Entry],
        starts: Sequence[int],
        scalar_positions: Sequence[int],
    ) -> None:
        self._copy = copy
        self._entries = entries
        self._starts = starts
        self._scalar_positions = scalar_positions
        self.nbytes = copy.nbytes

    def result(self) -> np.ndarray:
        """Every reduction, in the order of their names, as float64."""
        flat = self._copy.result().astype(np.float64, copy=False)
        values: list[float] = []
        for entry, start in zip(self._entries, self._starts, strict=True):
            found: dict[str, float] = {}
            for name, offset in zip(entry.passes, entry.offsets, strict=True):
                position = start + offset
                if name == "minmax":
                    found["min"], found["max"] = float(flat[position]), float(flat[position + 1])
                else:
                    found[name] = float(flat[position])
            values.extend(_DERIVE[op](found, entry.count) for op in entry.ops)
        values.extend(float(flat[position]) for position in self._scalar_positions)
        return np.asarray(values, dtype=np.float64)


class ReductionBatch:
    """The reductions of one step: names, saved dtypes, and pass results still on the device."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.dtypes: list[str] = []
        self._entries: list[_Entry] = []
        self._scalar_names: list[str] = []
        self._scalar_dtypes: list[str] = []
        self._scalar_slots: list[tuple[torch.dtype, int]] = []
        self._values: dict[torch.dtype, list[torch.Tensor]] = {}

    def _bucket(self, dtype: torch.dtype) -> list[torch.Tensor]:
        bucket = self._values.get(dtype)
        if bucket is None:
            bucket = self._values[dtype] = []
        return bucket

    def add(
        self,
        reduction_names: Sequence[Sequence[str]],
        tensors: Sequence[torch.Tensor],
        ops: Sequence[Op],
    ) -> None:
        """Reduce ``tensors`` by ``ops``; ``reduction_names[i][j]`` names op j of tensor i.

        The tensors must not be empty.
        """
        ops = tuple(ops)
        passes, offsets, orders = _layout(ops)
        prepared = []
        for tensor in tensors:
            x = tensor.detach() if tensor.requires_grad else tensor
            wanted = _accumulate_dtype(x.dtype)
            prepared.append(x if x.dtype == wanted else x.to(wanted))
        shared: list[dict[int, torch.Tensor]] = [{} for _ in prepared]
        if len(prepared) > 1 and orders:
            _batched_norms(prepared, orders, shared)
        for names, tensor, x, norms in zip(reduction_names, tensors, prepared, shared, strict=True):
            bucket = self._bucket(x.dtype)
            first = len(bucket)
            for name in passes:
                bucket.extend(_run_pass(name, x, norms))
            self._entries.append(_Entry(names, ops, passes, offsets, x.numel(), x.dtype, first))
            self.names.extend(names)
            self.dtypes.extend([saved_dtype(tensor.dtype)] * len(names))

    def add_value(self, name: str, dtype: str, value: torch.Tensor) -> None:
        """Add a value already computed (a scalar saved by the user)."""
        value = value.detach().reshape(())
        bucket = self._bucket(value.dtype)
        self._scalar_names.append(name)
        self._scalar_dtypes.append(dtype)
        self._scalar_slots.append((value.dtype, len(bucket)))
        bucket.append(value)

    def __bool__(self) -> bool:
        return bool(self.names or self._scalar_names)

    def finish(self) -> tuple[list[str], list[str], DerivedScalars]:
        """Names, dtypes and values of every reduction and scalar, values on their way to the host.

        One stack per dtype, one concatenation, one copy; no synchronisation here.
        """
        offsets: dict[torch.dtype, int] = {}
        parts = []
        total = 0
        for dtype, values in self._values.items():
            offsets[dtype] = total
            total += len(values)
            stacked = torch.stack(values)
            parts.append(stacked if dtype == torch.float64 else stacked.to(torch.float64))
        devices = {part.device for part in parts}
        if len(devices) > 1:
            parts = [part.to("cpu") for part in parts]
        buffer = torch.cat(parts) if len(parts) > 1 else parts[0]
        starts = [offsets[entry.dtype] + entry.first for entry in self._entries]
        scalars = [offsets[dtype] + index for dtype, index in self._scalar_slots]
        derived = DerivedScalars(start_copy(buffer, snapshot=False), self._entries, starts, scalars)
        names = self.names + self._scalar_names
        dtypes = self.dtypes + self._scalar_dtypes
        return names, dtypes, derived


def _batched_norms(
    tensors: list[torch.Tensor], orders: Sequence[int], into: list[dict[int, torch.Tensor]]
) -> None:
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for index, tensor in enumerate(tensors):
        groups.setdefault((tensor.device, tensor.dtype), []).append(index)
    for members in groups.values():
        if len(members) < 2:
            continue
        for order in orders:
            norms = torch._foreach_norm([tensors[i] for i in members], order)
            for index, norm in zip(members, norms, strict=True):
                into[index][order] = norm
