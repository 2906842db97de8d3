"""Reductions computed on the read side, when the job saved the raw tensor but not the reduction.

The operations are smdebug's: min, max, mean, std, variance, sum, prod, and the norms l1, l2,
each optionally of the absolute values. Norms are vector norms over all elements, which is how
the hook computes the reductions it saves (smdebug's read side instead takes a matrix norm of
2-D tensors, which disagrees with its own hook).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from trainprobe.config.errors import ConfigError, closest
from trainprobe.storage.reduction_names import FINGERPRINT, NORMS, REDUCTIONS, fingerprint_of

__all__ = ["canonical_reduction", "compute_reduction"]

_OPERATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "min": lambda a: np.asarray(np.min(a)),
    "max": lambda a: np.asarray(np.max(a)),
    "mean": lambda a: np.asarray(np.mean(a)),
    "std": lambda a: np.asarray(np.std(a)),
    "variance": lambda a: np.asarray(np.var(a)),
    "sum": lambda a: np.asarray(np.sum(a)),
    "prod": lambda a: np.asarray(np.prod(a)),
    "l1": lambda a: np.asarray(np.linalg.norm(a.reshape(-1), ord=1)),
    "l2": lambda a: np.asarray(np.linalg.norm(a.reshape(-1), ord=2)),
    FINGERPRINT: lambda a: np.asarray(fingerprint_of(a)),
}


def canonical_reduction(name: str) -> str:
    """The on-disk name of a reduction: ``l1_norm``/``l2_norm`` become ``l1``/``l2``.

    Raises ConfigError for an unknown reduction, suggesting the closest valid one.
    """
    op = name.removesuffix("_norm") if name in ("l1_norm", "l2_norm") else name
    if op not in _OPERATIONS:
        allowed = "one of " + ", ".join(REDUCTIONS + NORMS)
        raise ConfigError("reduction_name", name, allowed, suggestion=closest(name, _OPERATIONS))
    return op


def compute_reduction(name: str, array: np.ndarray, abs: bool = False) -> np.ndarray:
    """Reduction ``name`` of ``array`` (of its absolute values when ``abs``), as a 0-d array."""
    values = np.absolute(array) if abs else np.asarray(array)
    return _OPERATIONS[canonical_reduction(name)](values)
