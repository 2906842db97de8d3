"""How a reduction of a tensor is named on disk, and the way back.

A reduction is saved as an ordinary scalar tensor named ``smdebug/reductions/<op>/<name>``, or
``smdebug/reductions/abs_<op>/<name>`` for a reduction of the absolute values. Norms are named
``l1`` and ``l2`` (not ``l1_norm``). The hook names reductions with
``reduction_tensor_name``; the trial recognises them with ``parse_reduction_tensor_name`` and
files them under the original tensor.
"""

from __future__ import annotations

from typing import NamedTuple

from trainprobe.config.errors import ConfigError, closest

__all__ = [
    "NORMS",
    "REDUCTIONS",
    "REDUCTION_PREFIX",
    "ReductionName",
    "parse_reduction_tensor_name",
    "reduction_tensor_name",
]

REDUCTION_PREFIX = "smdebug/reductions/"
REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
NORMS = ("l1", "l2")
_OPS = REDUCTIONS + NORMS


class ReductionName(NamedTuple):
    """A reduction tensor's parts: the operation, whether of absolute values, and the tensor."""

    op: str
    abs: bool
    tensor_name: str


def _canonical_op(op: str) -> str:
    name = op.removesuffix("_norm") if op in ("l1_norm", "l2_norm") else op
    if name not in _OPS:
        allowed = "one of " + ", ".join(_OPS)
        raise ConfigError("reduction", op, allowed, suggestion=closest(op, _OPS))
    return name


def reduction_tensor_name(op: str, name: str, abs: bool) -> str:
    """The name under which reduction ``op`` of tensor ``name`` is saved.

    ``op`` is one of min, max, mean, std, variance, sum, prod, l1, l2 (``l1_norm`` and
    ``l2_norm`` are accepted for the norms); anything else raises ConfigError.
    """
    prefix = "abs_" if abs else ""
    return f"{REDUCTION_PREFIX}{prefix}{_canonical_op(op)}/{name}"


def parse_reduction_tensor_name(tensor_name: str) -> ReductionName | None:
    """The parts of a reduction tensor's name, or None when ``tensor_name`` is not one."""
    if not tensor_name.startswith(REDUCTION_PREFIX):
        return None
    op, slash, original = tensor_name[len(REDUCTION_PREFIX) :].partition("/")
    if not slash or not original:
        return None
    is_abs = op.startswith("abs_")
    op = op.removeprefix("abs_")
    if op not in _OPS:
        return None
    return ReductionName(op, is_abs, original)
