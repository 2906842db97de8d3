"""Reading a Keras training's own state from the callback: its optimizer's counts, its settings.

Read only where the state is there to read: on JAX the trainer keeps the state outside the model
during an epoch, and ``sync`` brings it back into the model's variables (it costs the next step
a copy), so the hook syncs at the start of ``fit`` and of each epoch, at the end of an epoch's
training batches and at saved steps, never at a step that saves nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np

__all__ = ["TrainingState"]


class TrainingState:
    """The state of the model a callback follows (``model()`` gives it)."""

    def __init__(self, backend: str, model: Callable[[], Any]) -> None:
        self.backend = backend
        self._model = model

    def sync(self) -> None:
        """Bring JAX's state back into the model's variables (a no-op on other backends)."""
        model = self._model()
        if self.backend == "jax" and hasattr(model, "jax_state_sync"):
            model.jax_state_sync()

    def micro_batches(self) -> int:
        """The optimizer's count of micro-batches (its ``iterations`` times the accumulation),
        read where the state is synced."""
        optimizer = getattr(self._model(), "optimizer", None)
        counter = getattr(optimizer, "_iterations", None)
        if counter is None:
            return 0
        self.sync()
        return int(np.asarray(keras.ops.convert_to_numpy(counter.value)))

    def accumulation(self, model: Any = None) -> int:
        """How many batches make one update (``gradient_accumulation_steps``, else 1)."""
        optimizer = getattr(model or self._model(), "optimizer", None)
        return int(getattr(optimizer, "gradient_accumulation_steps", None) or 1)

    def steps_per_execution(self) -> int:
        """How many batches Keras runs between two batch callbacks."""
        return int(getattr(self._model(), "steps_per_execution", 1) or 1)
