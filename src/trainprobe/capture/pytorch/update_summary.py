"""One summary of an update, gathered in one pass for every in-training rule.

At an update (``optimizer.step()``'s pre-hook) the in-training rules need a few numbers of the
step: the non-finite guard whether any of its tensors (the step's losses, the gradients that
stand for the others) holds a NaN or an infinity; GradientNormSpike the global l2 norm of the
optimizer's gradients; LossSpike the loss. ``UpdateSummary`` takes them in **one pass over the
gradients**, whatever is armed, into one small vector on their device:

- with the gradient norm wanted: each tensor's l2 norm, one fused ``_foreach_norm`` per device
  and dtype, accumulated in float64 (it cannot overflow: a tensor's norm is finite exactly when
  its values are), over the guard's tensors and the optimizer's gradients together; the global
  norm is summed from the gradients' part of it. On a device whose values the host reads freely
  (the CPU) a float32 or float64 tensor's norm is taken in its own dtype (16-bit ones in float32):
  there widening every gradient to float64 would cost ten times the pass itself (11.6 against
  1.0 ms for an MLP's 1.8 million gradients), and the guard checks a tensor whose norm is not
  finite element by element before it counts. There the norms are read as numbers at once and
  the global norm summed from them in Python (``gradient_norm_now``): right after a backward
  pass each further operation would cost tens of microseconds;
- for the guard alone: on a device whose values the host reads freely (the CPU), first the sum
  of the tensors laid end to end (two operations, whatever their number) and, only when that is
  not finite, each tensor's l2 norm in float32 (a large finite sum or square overflows: a tensor
  found non-finite is checked element by element before it counts); elsewhere (a GPU) each
  tensor's largest magnitude, which cannot overflow.

Readers add their own small parts to the vector (the spike rules' verdicts, judged on the
device), and ``send`` copies it to the host once, without blocking; each reader reads it a step
late (``read``), where reading it now would wait for the device. On the CPU it is read at once.
What a rule needs beyond the summary (locating a NaN, a rollback's snapshot) happens only after
a detection.

Sharded gradients (``DTensor``s: FSDP2, tensor parallelism) are checked and measured by the piece
each rank holds (``shards``). Their global norm is the full gradients': each piece's square
counts once over its replicas (an ordinary gradient beside them, the same on every rank, once
over all), and the sum goes through one all-reduce before the square root, with the values of
the gradients that are sums of the ranks' terms (a sequence-parallel norm's, small), whose
squares follow only from the sum. A training without sharded gradients reduces nothing.

A capability that keeps every TRAIN step's loss and global gradient norm reads ``loss`` and
``gradient_norm`` from the summary (and adds them to the vector sent), without a pass of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.distributed as dist

from trainprobe.capture.overhead import wait_for_device
from trainprobe.capture.pytorch.host_copy import host_reads_are_free, to_host_later
from trainprobe.capture.pytorch.shards import Piece, has_pieces, piece_of

__all__ = ["UpdateSummary", "gradients_of"]


def gradients_of(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The gradients ``optimizer`` is about to apply."""
    return [
        p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None
    ]


def _host_norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The l2 norm of each of ``tensors`` (of one dtype, on the host) in its own dtype (16-bit
    ones in float32), from one fused kernel and one stack."""
    dtype = tensors[0].dtype
    wide = None if dtype in (torch.float32, torch.float64) else torch.float32
    return torch.stack(list(torch._foreach_norm(tensors, 2, dtype=wide)))


@dataclass
class _Group:
    """The tensors of one device and dtype in the pass: flagged ones first, then gradients
    (with the share of each one's square in the global norm's, when they are sharded)."""

    tensors: list[torch.Tensor] = field(default_factory=list)
    flagged: list[int | None] = field(default_factory=list)
    gradients: int = 0
    shares: list[float] = field(default_factory=list)


class UpdateSummary:
    """What the in-training rules need of one update (or one step's end), from one pass.

    ``flagged`` are the tensors whose non-finite values are looked for (the guard's);
    ``gradients`` (given when their global norm is wanted) the optimizer's; ``loss`` the step's.
    ``flag_order[i]`` is which flagged tensor the vector's value ``i`` belongs to (None: a
    gradient that is not flagged); ``flags_now`` the flagged values when they were read at once
    (the CPU; None also when every flagged tensor was finite: ``clean``).
    """

    def __init__(
        self,
        flagged: Sequence[torch.Tensor],
        gradients: Sequence[torch.Tensor] | None = None,
        loss: torch.Tensor | None = None,
    ) -> None:
        self.loss = loss
        self.gradient_norm_now: float | None = None
        """The global l2 norm of ``gradients`` when it was read at once (the CPU)."""
        self._gradient_norm: torch.Tensor | None = None
        self.flags: torch.Tensor | None = None
        self.flag_order: list[int | None] = []
        self.clean = False
        self.flags_now: list[float] | None = None
        self._parts: list[torch.Tensor] = []
        self._host: torch.Tensor | None = None
        self._event: Any = None
        self._values: list[float] | None = None
        with torch.no_grad():
            flagged = [piece_of(tensor)[0] for tensor in flagged]
            if gradients:
                self._norms_of_all(flagged, _Gradients(list(gradients)))
            elif flagged:
                self._flags_only(flagged)

    @property
    def gradient_norm(self) -> torch.Tensor | None:
        """The global l2 norm of ``gradients`` (float64, on their device), when asked for."""
        if self._gradient_norm is None and self.gradient_norm_now is not None:
            self._gradient_norm = torch.tensor(self.gradient_norm_now, dtype=torch.float64)
        return self._gradient_norm

    # ----- the pass -----

    def _norms_of_all(self, flagged: list[torch.Tensor], summed: _Gradients) -> None:
        """Each tensor's l2 norm in float64, flagged ones and gradients together, one fused
        kernel per device and dtype; the gradients' global norm from them."""
        groups: dict[tuple[torch.device, torch.dtype], _Group] = {}
        gradients = summed.local
        wanted = {id(gradient) for gradient in gradients}
        for index, tensor in enumerate(flagged):
            if id(tensor) not in wanted:
                group = groups.setdefault((tensor.device, tensor.dtype), _Group())
                group.tensors.append(tensor)
                group.flagged.append(index)
        position = {id(tensor): index for index, tensor in enumerate(flagged)}
        for gradient, share in zip(gradients, summed.shares, strict=True):
            group = groups.setdefault((gradient.device, gradient.dtype), _Group())
            group.tensors.append(gradient)
            group.flagged.append(position.get(id(gradient)))
            group.gradients += 1
            group.shares.append(share)
        if not summed.sharded and all(host_reads_are_free(where) for where, _ in groups):
            self._norms_read_at_once(list(groups.values()), bool(flagged))
            return
        device = gradients[0].device
        parts, squares = [], []
        for (where, _), group in groups.items():
            if host_reads_are_free(where):
                part = _host_norms(group.tensors).to(device, torch.float64)
            else:
                norms = torch._foreach_norm(group.tensors, 2, dtype=torch.float64)
                part = torch.stack(list(norms)).to(device)
            parts.append(part)
            self.flag_order.extend(group.flagged)
            if group.gradients:
                square = part[len(part) - group.gradients :].square()
                if summed.sharded:  # each piece once over its replicas
                    square = square * _shares(tuple(group.shares), device)
                squares.append(square.sum())
        total = squares[0] if len(squares) == 1 else torch.stack(squares).sum()
        if summed.sharded:
            total = summed.all_reduced(total)
        self._gradient_norm = total.sqrt()
        if not flagged:
            return  # nobody reads the tensors' own norms
        self.flags = parts[0] if len(parts) == 1 else torch.cat(parts)
        if host_reads_are_free(device):
            self.flags_now = cast(list[float], self.flags.tolist())

    def _norms_read_at_once(self, groups: list[_Group], flagged: bool) -> None:
        """On the host: each group's norms in its own dtype (16-bit ones in float32), one fused
        kernel and one stack each, read as numbers; the global norm summed from them."""
        parts: list[torch.Tensor] = []
        values: list[float] = []
        squares = 0.0
        for group in groups:
            part = _host_norms(group.tensors)
            norms = cast(list[float], part.tolist())
            squares += math.fsum(norm * norm for norm in norms[len(norms) - group.gradients :])
            parts.append(part)
            values.extend(norms)
            self.flag_order.extend(group.flagged)
        self.gradient_norm_now = math.sqrt(squares)
        if flagged:
            self.flags = parts[0] if len(parts) == 1 else torch.cat([p.double() for p in parts])
            self.flags_now = values

    def _flags_only(self, flagged: list[torch.Tensor]) -> None:
        """The guard's check alone (see the module docstring)."""
        if _sum_is_finite(flagged):
            self.clean = True
            return
        order, values = _norms(flagged)
        self.flags, self.flag_order = values, list(order)
        if host_reads_are_free(values.device):
            self.flags_now = cast(list[float], values.tolist())

    # ----- the host copy -----

    def add(self, part: torch.Tensor) -> int:
        """Add ``part`` (a reader's small vector) to what is sent to the host; its offset in
        what ``read`` returns (after the flags)."""
        offset = sum(len(p) for p in self._parts)
        self._parts.append(part)
        return (len(self.flags) if self.flags is not None else 0) + offset

    def send(self) -> None:
        """Copy the flags and every part added to the host, without blocking (once)."""
        if self._host is not None:
            return
        parts = ([] if self.flags is None else [self.flags]) + self._parts
        if not parts:
            return
        if len(parts) == 1:
            vector = parts[0]
        else:
            device = parts[0].device
            vector = torch.cat([p.to(device, torch.float64) for p in parts])
        self._host, self._event = to_host_later(vector)

    def ready(self) -> bool:
        """Whether what was sent has reached the host (reading it would not wait)."""
        return self._event is None or bool(self._event.query())

    def read(self) -> list[float]:
        """What was sent, on the host (waiting for it if it has not arrived yet)."""
        if self._values is None:
            self.send()
            if self._host is None:
                return []
            if self._event is not None:
                wait_for_device(self._event)
            self._values = cast(list[float], self._host.tolist())
        return self._values


class _Gradients:
    """The gradients whose global norm is wanted, as this rank holds them (see the module
    docstring): the local pieces, each one's share of its square in the global norm's (0 for
    a gradient that is a sum of the ranks' terms: it joins the all-reduce itself)."""

    def __init__(self, gradients: list[torch.Tensor]) -> None:
        self.sharded = has_pieces(gradients)
        self.local: list[torch.Tensor] = []
        self.shares: list[float] = []
        self.terms: list[tuple[torch.Tensor, Piece]] = []
        world = dist.get_world_size() if self.sharded else 1
        for gradient in gradients:
            local, piece = piece_of(gradient)
            self.local.append(local)
            if piece is None:
                self.shares.append(1.0 / world)  # the same on every rank
            elif piece.summed and piece.combinable:
                self.shares.append(0.0)
                self.terms.append((local, piece))
            else:
                self.shares.append(1.0 / piece.copies)

    def all_reduced(self, square: torch.Tensor) -> torch.Tensor:
        """The global sum of squares from this rank's share of it, ``square``: one all-reduce
        (on the gradients' device), with the terms of summed gradients beside it."""
        parts = [square.reshape(1)] + [t.reshape(-1).to(square) for t, _ in self.terms]
        buffer = torch.cat(parts) if len(parts) > 1 else parts[0].clone()
        dist.all_reduce(buffer)
        total = buffer[0]
        start = 1
        for local, piece in self.terms:
            whole = buffer[start : start + local.numel()] / piece.copies  # summed over replicas
            total = total + whole.square().sum()
            start += local.numel()
        return total


_shares_made: dict[tuple[tuple[float, ...], torch.device], torch.Tensor] = {}


def _shares(shares: tuple[float, ...], device: torch.device) -> torch.Tensor:
    """``shares`` as a tensor on ``device``, made once (no copy to the device a step)."""
    key = (shares, device)
    found = _shares_made.get(key)
    if found is None:
        if len(_shares_made) >= 64:
            _shares_made.clear()
        found = _shares_made[key] = torch.tensor(shares, dtype=torch.float64, device=device)
    return found


def _norms(tensors: list[torch.Tensor]) -> tuple[list[int], torch.Tensor]:
    """Each tensor's norm (the largest magnitude; the l2 norm where the host reads values
    freely), one fused kernel per device and dtype, as one vector on the first tensor's device;
    with the tensors' indices in the vector's order."""
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for index, tensor in enumerate(tensors):
        groups.setdefault((tensor.device, tensor.dtype), []).append(index)
    device = tensors[0].device
    order: list[int] = []
    parts: list[torch.Tensor] = []
    for (where, _), members in groups.items():
        group = [tensors[i] for i in members]
        if host_reads_are_free(where):
            norms = torch._foreach_norm(group, 2, dtype=torch.float32)
        else:
            norms = torch._foreach_norm(group, math.inf)
        parts.append(torch.stack(list(norms)))
        order.extend(members)
    if len(parts) == 1:
        return order, parts[0]
    return order, torch.cat([part.to(device, torch.float32) for part in parts])


def _sum_is_finite(tensors: list[torch.Tensor]) -> bool:
    """Whether ``tensors`` are dense, on the host, and all finite, short of an overflow (which the
    per-tensor check that follows clears): a single value (a loss) is read as it is, the others
    summed laid end to end. Two operations, whatever their number: right after a backward pass
    each distinct operation costs tens of microseconds on the CPU (its code is out of the
    caches), a per-tensor norm several."""
    if not host_reads_are_free(tensors[0].device):
        return False
    rest = []
    for tensor in tensors:
        if tensor.layout != torch.strided:
            return False  # sparse: checked one by one
        if tensor.ndim == 0 and host_reads_are_free(tensor.device):
            if not math.isfinite(cast(float, tensor.tolist())):  # read without an operation
                return False
        else:
            rest.append(tensor if tensor.ndim == 1 else tensor.reshape(-1))
    if not rest:
        return True
    try:
        flat = torch.cat(rest)
    except RuntimeError:  # on several devices: checked one by one
        return False
    return math.isfinite(cast(float, flat.sum().tolist()))
