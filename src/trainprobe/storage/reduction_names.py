"""How a reduction of a tensor is named on disk, and the way back.

A reduction is saved as an ordinary scalar tensor named ``smdebug/reductions/<op>/<name>``, or
``smdebug/reductions/abs_<op>/<name>`` for a reduction of the absolute values. Norms are named
``l1`` and ``l2`` (not ``l1_norm``). The hook names reductions with
``reduction_tensor_name``; the trial recognises them with ``parse_reduction_tensor_name`` and
files them under the original tensor.

One more is trainprobe's own: ``smdebug/reductions/fingerprint/<name>``, a parameter's fingerprint
(a sum of its values weighted by position), by which the ReplicaDivergence rule compares the
replicas of a data-parallel training. smdebug's trial files it as a reduction named
``fingerprint``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from trainprobe.config.errors import ConfigError, closest

__all__ = [
    "FINGERPRINT",
    "FINGERPRINT_PERIOD",
    "NORMS",
    "REDUCTIONS",
    "REDUCTION_PREFIX",
    "ReductionName",
    "fingerprint_of",
    "fingerprint_tensor_name",
    "fingerprint_weights",
    "parse_reduction_tensor_name",
    "reduction_tensor_name",
]

REDUCTION_PREFIX = "smdebug/reductions/"
REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
NORMS = ("l1", "l2")
_OPS = REDUCTIONS + NORMS
FINGERPRINT = "fingerprint"
"""The reduction name of a parameter's fingerprint (not a reduction a user asks for)."""

FINGERPRINT_PERIOD = 127
"""The fingerprint's weights repeat every this many values (a prime): a tensor is summed as a
matrix of this many columns, without a buffer of its size."""


@functools.lru_cache(maxsize=1)
def fingerprint_weights() -> np.ndarray:
    """The fingerprint's weights: fixed random numbers in [-1, 1), the same in every process."""
    weights = np.random.default_rng(20261202).uniform(-1.0, 1.0, FINGERPRINT_PERIOD)
    weights.flags.writeable = False
    return weights


def fingerprint_of(values: np.ndarray) -> float:
    """A tensor's fingerprint: the sum of its values, each weighted by the weight of its
    position (``fingerprint_weights``, repeating), in float64. Tensors with any different value
    have different fingerprints, short of a one in 2**52 cancellation."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    weights = fingerprint_weights()
    whole = flat.size // FINGERPRINT_PERIOD * FINGERPRINT_PERIOD
    total = float(flat[:whole].reshape(-1, FINGERPRINT_PERIOD).sum(axis=0) @ weights)
    return total + float(flat[whole:] @ weights[: flat.size - whole])


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


def fingerprint_tensor_name(name: str) -> str:
    """The name under which tensor ``name``'s fingerprint is saved."""
    return f"{REDUCTION_PREFIX}{FINGERPRINT}/{name}"


def parse_reduction_tensor_name(tensor_name: str) -> ReductionName | None:
    """The parts of a reduction tensor's name, or None when ``tensor_name`` is not one."""
    if not tensor_name.startswith(REDUCTION_PREFIX):
        return None
    op, slash, original = tensor_name[len(REDUCTION_PREFIX) :].partition("/")
    if not slash or not original:
        return None
    is_abs = op.startswith("abs_")
    op = op.removeprefix("abs_")
    if op not in _OPS and not (op == FINGERPRINT and not is_abs):
        return None
    return ReductionName(op, is_abs, original)
