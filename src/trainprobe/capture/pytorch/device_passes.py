"""The passes over a tensor's values that its reductions need, computed where the tensor lives.

Each reduction needs one of a few passes over the data, each at most once per tensor:
``aminmax`` (min and max together), ``sum``, the l1 and l2 norms, ``prod``, the population
variance, and, only when asked for, the minimum and variance of the absolute values
(``device_reductions`` derives every reduction from them on the host). One more pass is not a
reduction a user asks for: the ``fingerprint`` of a parameter (``FINGERPRINT``), by which
replicas that should be equal are compared (the ReplicaDivergence rule).

On a GPU, tensors captured together (a model's parameters, a step's gradients) that share a dtype
and the requested reductions are reduced together, whatever their number: over one flat buffer
of them all, one segment reduction per pass (``torch.segment_reduce``: the norms as sums of
magnitudes or squares; two rounds where a tensor is longer than ``PIECE_ELEMENTS``, so that a
large tensor is reduced by many multiprocessors, not one). A step so launches a constant number
of kernels per group and pass, not per tensor, and handles no tensor one by one in Python (the
flat buffer is built in pieces of at most ``FLAT_ELEMENTS`` values, so that it stays small next
to the model). On the CPU, where an operation launches nothing, each tensor is reduced by
itself, which runs faster there.

Passes run in float32 (float64 for float64 and 32/64-bit integer tensors, which float32 cannot
hold exactly; the fingerprint always in float64).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch

from trainprobe.storage.reduction_names import FINGERPRINT_PERIOD, fingerprint_weights

__all__ = [
    "BATCHED_DEVICES",
    "DERIVE",
    "FINGERPRINT",
    "FLAT_ELEMENTS",
    "PIECE_ELEMENTS",
    "Op",
    "in_pass_order",
    "layout",
    "pass_values",
    "passes_for",
    "reduce_group",
    "saved_dtype",
]

Op = tuple[str, bool]

FINGERPRINT: Op = ("fingerprint", False)
"""A parameter's fingerprint (``storage.reduction_names.fingerprint_of``): equal tensors,
reduced the same way, have the same; tensors with any different value, different ones."""

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
    FINGERPRINT: "fingerprint",
}
_ORDER = ("minmax", "sum", "l1", "l2", "prod", "var", "absmin", "absvar", "fingerprint")
_WIDTH = {"minmax": 2}
_ORDERS = {"l1": 1, "l2": 2}

# Each reduction from its tensors' pass results (a vector a pass) and value counts.
Derive = Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray]
DERIVE: dict[Op, Derive] = {
    ("min", False): lambda p, n: p["min"],
    ("max", False): lambda p, n: p["max"],
    ("sum", False): lambda p, n: p["sum"],
    ("mean", False): lambda p, n: p["sum"] / n,
    ("prod", False): lambda p, n: p["prod"],
    ("std", False): lambda p, n: np.sqrt(np.maximum(p["var"], 0.0)),
    ("variance", False): lambda p, n: p["var"],
    ("l1", False): lambda p, n: p["l1"],
    ("l2", False): lambda p, n: p["l2"],
    ("min", True): lambda p, n: p["absmin"],
    ("max", True): lambda p, n: np.maximum(np.abs(p["min"]), np.abs(p["max"])),
    ("sum", True): lambda p, n: p["l1"],
    ("mean", True): lambda p, n: p["l1"] / n,
    ("prod", True): lambda p, n: np.abs(p["prod"]),
    ("std", True): lambda p, n: np.sqrt(np.maximum(p["absvar"], 0.0)),
    ("variance", True): lambda p, n: p["absvar"],
    ("l1", True): lambda p, n: p["l1"],
    ("l2", True): lambda p, n: p["l2"],
    FINGERPRINT: lambda p, n: p["fingerprint"],
}


def in_pass_order(passes: set[str]) -> tuple[str, ...]:
    """``passes`` in the fixed order they are computed and laid out in."""
    return tuple(name for name in _ORDER if name in passes)


@functools.lru_cache(maxsize=256)
def passes_for(ops: tuple[Op, ...]) -> tuple[str, ...]:
    """The passes over the data that reductions ``ops`` need, in a fixed order."""
    wanted = {_NEEDS[op] for op in ops}
    return tuple(name for name in _ORDER if name in wanted)


@functools.lru_cache(maxsize=256)
def layout(ops: tuple[Op, ...]) -> tuple[tuple[str, ...], tuple[int, ...], int]:
    """The passes ``ops`` need, where each pass's results start among a tensor's results, and
    how many results a tensor has."""
    passes = passes_for(ops)
    offsets, cursor = [], 0
    for name in passes:
        offsets.append(cursor)
        cursor += _WIDTH.get(name, 1)
    return passes, tuple(offsets), cursor


def _accumulate_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.float64 or dtype in (torch.int64, torch.int32):
        return torch.float64
    return torch.float32


def saved_dtype(dtype: torch.dtype) -> str:
    """The numpy dtype a reduction of a tensor of ``dtype`` is saved as."""
    return "float64" if _accumulate_dtype(dtype) == torch.float64 else "float32"


BATCHED_DEVICES = {"cuda"}
"""Device types that run each operation as a kernel launch: there a group of tensors is reduced
in a constant number of operations. Elsewhere (the CPU) each tensor gets its own few operations:
a CPU runs per-tensor reductions faster than segment reductions over a flat copy."""

FLAT_ELEMENTS = 1 << 26
"""The most values one flat buffer of a group's tensors holds (256 MB in float32)."""


def _pieces(sizes: list[int]) -> list[list[int]]:
    """The indices of tensors of ``sizes`` values, in runs of at most FLAT_ELEMENTS values (or
    of one tensor)."""
    pieces: list[list[int]] = [[]]
    total = 0
    for index, size in enumerate(sizes):
        if pieces[-1] and total + size > FLAT_ELEMENTS:
            pieces.append([])
            total = 0
        pieces[-1].append(index)
        total += size
    return pieces


PIECE_ELEMENTS = 1 << 16
"""The longest segment a segment reduction is given. A segment is reduced by one block of
threads: a tensor of millions of values would keep one multiprocessor busy while the others
idle, so longer tensors are cut into pieces, and the pieces' results reduced again per tensor."""


class _Segments:
    """How a flat buffer of tensors of given sizes is reduced per tensor, in at most two rounds
    of segment reductions; made once per layout (the lengths live on the device, not copied a
    step)."""

    def __init__(self, device: torch.device, sizes: tuple[int, ...]) -> None:
        self.lengths = torch.tensor(sizes, dtype=torch.int64, device=device)
        # The pieces' lengths, and how many pieces each tensor has (None: nothing is cut).
        self._rounds: tuple[torch.Tensor, torch.Tensor] | None = None
        if max(sizes) > PIECE_ELEMENTS:
            pieces: list[int] = []
            counts: list[int] = []
            for size in sizes:
                whole, rest = divmod(size, PIECE_ELEMENTS)
                pieces += [PIECE_ELEMENTS] * whole + ([rest] if rest else [])
                counts.append(whole + (1 if rest else 0))
            self._rounds = (
                torch.tensor(pieces, dtype=torch.int64, device=device),
                torch.tensor(counts, dtype=torch.int64, device=device),
            )

    def reduce(self, flat: torch.Tensor, how: str) -> torch.Tensor:
        """Each tensor's ``how`` ("min", "max", "sum" or "prod") of its values in ``flat``."""
        if self._rounds is None:
            return torch.segment_reduce(flat, how, lengths=self.lengths, unsafe=True)
        pieces, counts = self._rounds
        partial = torch.segment_reduce(flat, how, lengths=pieces, unsafe=True)
        return torch.segment_reduce(partial, how, lengths=counts, unsafe=True)

    def fingerprint(self, flat: torch.Tensor) -> torch.Tensor:
        """Each tensor's fingerprint (``FINGERPRINT``): its values weighted by position."""
        starts = torch.cumsum(self.lengths, 0) - self.lengths
        position = torch.arange(flat.numel(), device=flat.device) - torch.repeat_interleave(
            starts, self.lengths, output_size=flat.numel()
        )
        weights = _weights(flat.device)[position % FINGERPRINT_PERIOD]
        return self.reduce(flat.double() * weights, "sum")

    def variance(self, flat: torch.Tensor) -> torch.Tensor:
        """Each tensor's population variance (two passes: the mean, then the squared
        deviations)."""
        counts = self.lengths.to(flat.dtype)
        mean = self.reduce(flat, "sum") / counts
        spread = torch.repeat_interleave(mean, self.lengths, output_size=flat.numel())
        centred = flat - spread
        return self.reduce(centred * centred, "sum") / counts


_segments_made: dict[tuple[torch.device, tuple[int, ...], int], _Segments] = {}


def _segments(device: torch.device, sizes: tuple[int, ...]) -> _Segments:
    key = (device, sizes, PIECE_ELEMENTS)
    found = _segments_made.get(key)
    if found is None:
        if len(_segments_made) >= 256:
            _segments_made.clear()
        found = _segments_made[key] = _Segments(device, sizes)
    return found


def reduce_group(
    tensors: list[torch.Tensor], sizes: list[int], passes: tuple[str, ...]
) -> torch.Tensor:
    """The passes' results for ``tensors`` of ``sizes`` values (one device and dtype), in the
    accumulation dtype: each tensor's in turn, in the order of ``passes``, as one vector."""
    if len(tensors) == 1 or tensors[0].device.type not in BATCHED_DEVICES:
        values: list[torch.Tensor] = []
        for tensor in tensors:
            values += pass_values(tensor, passes)
        return torch.stack(values)
    rows = []
    for piece in _pieces(sizes):
        members = [tensors[i] for i in piece]
        if len(members) == 1:
            rows.append(torch.stack(pass_values(members[0], passes)).reshape(1, -1))
            continue
        wanted = _accumulate_dtype(members[0].dtype)
        flat = torch._C._nn.flatten_dense_tensors(members)
        if flat.dtype != wanted:
            flat = flat.to(wanted)
        segments = _segments(flat.device, tuple(sizes[i] for i in piece))
        columns: list[torch.Tensor] = []
        for name in passes:
            if name == "minmax":
                columns += [segments.reduce(flat, "min"), segments.reduce(flat, "max")]
            elif name in ("sum", "prod"):
                columns.append(segments.reduce(flat, name))
            elif name == "l1":
                columns.append(segments.reduce(flat.abs(), "sum"))
            elif name == "l2":
                columns.append(segments.reduce(flat * flat, "sum").sqrt())
            elif name == "var":
                columns.append(segments.variance(flat))
            elif name == "absmin":
                columns.append(segments.reduce(flat.abs(), "min"))
            elif name == "absvar":
                columns.append(segments.variance(flat.abs()))
            elif name == "fingerprint":
                columns.append(segments.fingerprint(flat))
            else:
                raise ValueError(f"unknown pass {name!r}")
        rows.append(torch.stack(columns, dim=1))
    return (rows[0] if len(rows) == 1 else torch.cat(rows)).reshape(-1)


def pass_values(tensor: torch.Tensor, passes: tuple[str, ...]) -> list[torch.Tensor]:
    """The passes' results for one tensor, each a value: one operation a pass, no flat
    buffer."""
    wanted = _accumulate_dtype(tensor.dtype)
    x = tensor if tensor.dtype == wanted else tensor.to(wanted)
    values: list[torch.Tensor] = []
    for name in passes:
        if name == "minmax":
            values.extend(torch.aminmax(x))
        elif name == "sum":
            values.append(x.sum())
        elif name in ("l1", "l2"):
            values.append(torch.linalg.vector_norm(x, _ORDERS[name]))
        elif name == "prod":
            values.append(x.prod())
        elif name == "var":
            values.append(x.var(correction=0))
        elif name == "absmin":
            values.append(x.abs().amin())
        elif name == "absvar":
            values.append(x.abs().var(correction=0))
        elif name == "fingerprint":
            values.append(_fingerprint(tensor))
        else:
            raise ValueError(f"unknown pass {name!r}")
    return values


_device_weights: dict[torch.device, torch.Tensor] = {}


def _weights(device: torch.device) -> torch.Tensor:
    found = _device_weights.get(device)
    if found is None:
        found = _device_weights[device] = torch.tensor(fingerprint_weights(), device=device)
    return found


def _fingerprint(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``'s fingerprint, in float64: summed as a matrix of ``FINGERPRINT_PERIOD``
    columns (a view), the columns' sums weighted, and the values left over."""
    flat = tensor.reshape(-1)
    weights = _weights(flat.device)
    whole = flat.numel() // FINGERPRINT_PERIOD * FINGERPRINT_PERIOD
    columns = flat[:whole].view(-1, FINGERPRINT_PERIOD).sum(0, dtype=torch.float64)
    total = columns @ weights
    if whole < flat.numel():
        rest = flat[whole:].to(torch.float64)
        total = total + rest @ weights[: rest.numel()]
    return total
