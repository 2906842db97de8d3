"""The values the Keras hook hands its writer: host copies of variables, and reductions of them
computed on the writer thread.

A variable is copied to the host when its step is saved (``host_copy``): the writer writes it
later, while the training goes on changing the variable in place (TensorFlow, PyTorch) or
donating its buffer to the next step (JAX). A reduction is computed from that copy on the writer
thread (``Reduction``, a ``PendingArray``), so that a step saving reductions costs the training
thread the copies only. The operations are smdebug's, as the trial computes them from a raw
tensor: numpy's population ``std`` and ``var``, and vector norms over every element.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from keras import ops

__all__ = ["Reduction", "host_copy"]

_OPERATIONS: dict[str, Callable[[np.ndarray], Any]] = {
    "min": np.min,
    "max": np.max,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
    "l1": lambda a: np.linalg.norm(a.reshape(-1), ord=1),
    "l2": lambda a: np.linalg.norm(a.reshape(-1), ord=2),
}


def host_copy(value: Any) -> np.ndarray:
    """A numpy array of its own holding ``value``'s content (a variable or a tensor)."""
    if hasattr(value, "value") and not isinstance(value, np.ndarray):
        value = value.value
    return np.array(ops.convert_to_numpy(value), copy=True)


class Reduction:
    """Reduction ``op`` of ``array`` (of its absolute values when ``of_abs``), computed when the
    writer asks for it."""

    nbytes = 8

    def __init__(self, array: np.ndarray, op: str, of_abs: bool) -> None:
        self._array = array
        self._op = op
        self._abs = of_abs

    def result(self) -> np.ndarray:
        """The reduction, as a 0-d array."""
        values = np.absolute(self._array) if self._abs else self._array
        return np.asarray(_OPERATIONS[self._op](values))
