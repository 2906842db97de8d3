"""Reductions of tensors computed where the tensors live, gathered into one buffer per step.

The device computes only the few passes over the data the requested reductions need, each at
most once per tensor: ``aminmax`` (min and max together), ``sum``, the l1 and l2 norms, ``prod``,
the population variance, and, only when asked for, the minimum and variance of the absolute
values. Everything else is derived from those on the host, by the writer thread: ``mean`` is the
sum over the count, ``std`` the root of the variance, ``abs_max`` the larger magnitude of min and
max, ``abs_sum``/``abs_l1`` the l1 norm, ``abs_mean`` the l1 norm over the count, ``abs_l2`` the
l2 norm and ``abs_prod`` the magnitude of the product.

On a GPU, tensors captured together (a model's parameters, a step's gradients) that share a dtype
and the requested reductions are reduced together, whatever their number: over one flat buffer
of them all, one segment reduction per pass (``torch.segment_reduce``: the norms as sums of
magnitudes or squares; two rounds where a tensor is longer than ``PIECE_ELEMENTS``, so that a
large tensor is reduced by many multiprocessors, not one). A step so launches a constant number
of kernels per group and pass, not per tensor, and handles no tensor one by one in Python (the
flat buffer is built in pieces of at most ``FLAT_ELEMENTS`` values, so that it stays small next
to the model). On the CPU, where an operation launches nothing, each tensor is reduced by
itself, which runs faster there.

Nothing is read back while the step runs: the results stay on the device until the step ends,
when they are gathered into one float64 tensor and copied to the host in one go; the writer
thread waits for that copy, derives the reductions and writes them.

Passes run in float32 (float64 for float64 and 32/64-bit integer tensors, which float32 cannot
hold exactly); reductions are saved as float32, or float64 for those wide tensors. ``std`` and
``variance`` are population statistics (divided by n), as numpy and the trial's read side
compute them from a raw tensor. (smdebug's PyTorch hook divided by n - 1.)
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
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
_ORDERS = {"l1": 1, "l2": 2}

# Each reduction from its tensors' pass results (a vector a pass) and value counts.
Derive = Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray]
_DERIVE: dict[Op, Derive] = {
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
}


@functools.lru_cache(maxsize=256)
def passes_for(ops: tuple[Op, ...]) -> tuple[str, ...]:
    """The passes over the data that reductions ``ops`` need, in a fixed order."""
    wanted = {_NEEDS[op] for op in ops}
    return tuple(name for name in _ORDER if name in wanted)


@functools.lru_cache(maxsize=256)
def _layout(ops: tuple[Op, ...]) -> tuple[tuple[str, ...], tuple[int, ...], int]:
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


def _reduce_group(
    tensors: list[torch.Tensor], sizes: list[int], passes: tuple[str, ...]
) -> torch.Tensor:
    """The passes' results for ``tensors`` of ``sizes`` values (one device and dtype), in the
    accumulation dtype: each tensor's in turn, in the order of ``passes``, as one vector."""
    if len(tensors) == 1 or tensors[0].device.type not in BATCHED_DEVICES:
        values: list[torch.Tensor] = []
        for tensor in tensors:
            values += _pass_values(tensor, passes)
        return torch.stack(values)
    rows = []
    for piece in _pieces(sizes):
        members = [tensors[i] for i in piece]
        if len(members) == 1:
            rows.append(torch.stack(_pass_values(members[0], passes)).reshape(1, -1))
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
            else:
                raise ValueError(f"unknown pass {name!r}")
        rows.append(torch.stack(columns, dim=1))
    return (rows[0] if len(rows) == 1 else torch.cat(rows)).reshape(-1)


def _pass_values(tensor: torch.Tensor, passes: tuple[str, ...]) -> list[torch.Tensor]:
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
        else:
            raise ValueError(f"unknown pass {name!r}")
    return values


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
        self, copy: HostCopy, blocks: Sequence[_Block], scalar_positions: Sequence[int]
    ) -> None:
        self._copy = copy
        self._blocks = blocks
        self._scalar_positions = np.asarray(scalar_positions, dtype=np.int64)
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
            columns = [_DERIVE[op](found, block.counts) for op in block.ops]
            parts.append(np.stack(columns, axis=1).reshape(-1))  # each tensor's in turn
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
        passes, offsets, width = _layout(ops)
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
                results = _reduce_group(group, [sizes[i] for i in members], passes)
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
        if len(groups) == 1:
            self.dtypes += [saved_dtype(kinds[0][1])] * (len(tensors) * len(ops))
        else:
            saved = {dtype: saved_dtype(dtype) for _, dtype in groups}
            self.dtypes.extend(saved[dtype] for _, dtype in kinds for _ in ops)

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
        return bool(self.names or self._scalar_names)

    def finish(self) -> tuple[list[str], list[str], DerivedScalars]:
        """Names, dtypes and values of every reduction and scalar, values on their way to the host.

        One concatenation, one copy; no synchronisation here.
        """
        parts = self._results
        if len({part.device for part in parts}) > 1:
            parts = [part.to("cpu") for part in parts]
        buffer = torch.cat(parts) if len(parts) > 1 else parts[0]
        derived = DerivedScalars(
            start_copy(buffer, snapshot=False), self._blocks, self._scalar_positions
        )
        return self.names + self._scalar_names, self.dtypes + self._scalar_dtypes, derived
