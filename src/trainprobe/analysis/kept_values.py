"""Values a trial keeps once read, for several readers of the same records in one process.

A rule evaluator that runs a job's built-in rules together (``trainprobe.rules.runner``) has each
rule ask for the tensors it needs at each new step, and several ask for the same ones (the
weights, the gradients). A kept value is read from disk, checked against its checksum and
decoded once, by its first reader; every later reader gets the same array, made read-only so that
no reader can change what the others see. The most recently used values are kept, up to a size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

__all__ = ["KeptValues"]


class KeptValues:
    """The most recently read values, up to ``max_bytes`` in all, by the record they came from."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._values: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._bytes = 0

    def get(self, record: Hashable) -> np.ndarray | None:
        """The value kept for ``record``, or None."""
        value = self._values.get(record)
        if value is not None:
            self._values.move_to_end(record)
        return value

    def keep(self, record: Hashable, value: np.ndarray) -> np.ndarray:
        """Keep ``value`` (read from ``record``) if it fits, read-only; returns it."""
        value.flags.writeable = False
        if value.nbytes > self.max_bytes or record in self._values:
            return value
        while self._values and self._bytes + value.nbytes > self.max_bytes:
            self._bytes -= self._values.popitem(last=False)[1].nbytes
        self._values[record] = value
        self._bytes += value.nbytes
        return value
