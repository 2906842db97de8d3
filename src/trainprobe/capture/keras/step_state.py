"""The hook's own values inside the training's compiled step, kept apart from the user's model.

The taps (``capture.keras.taps``) write values where the training computes them: the batch's
loss, the applied gradients, the in-training checks' windows and verdicts. Under ``tf.function``
and ``jax.jit`` a value leaves the step only through state the step writes, and that state must
not be the model's or the optimizer's: a user's ``optimizer.variables``, ``model.save``,
``ModelCheckpoint``, ``get_weights`` and pickling see exactly what they see without the hook.
So the hook keeps a ``StepState`` of its own, named entries of fixed shape and dtype:

- on TensorFlow and PyTorch each entry is a ``keras.Variable`` that belongs to nothing (no layer,
  no optimizer, no metric tracks it): the compiled step captures it and assigns it;
- on JAX, whose steps are pure functions of the state Keras passes them, the entries travel as
  one more member of that state: ``CarriedStepFunction`` appends them to what Keras passes its
  train (or test) function and takes them off what it returns, donated with the rest, so
  nothing is copied. Inside the step, ``get`` and ``set`` read and replace the traced values.

Between steps the host reads an entry (``read``: a copy, at a saved step) or sets one (``write``:
the flag that turns the gradients' copies on). An entry may also be published as the step's
``summary``: on JAX it is returned as an output of the step (never donated), so that the host can
read it later without waiting for the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

__all__ = ["CarriedStepFunction", "StepState"]


@dataclass(frozen=True)
class _Entry:
    shape: tuple[int, ...]
    dtype: str
    initial: float


class StepState:
    """Named values the training's step reads and writes for the hook (see the module
    docstring). Entries are added before the step functions are made."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self._entries: dict[str, _Entry] = {}
        self._variables: dict[str, keras.Variable] = {}
        self._held: dict[str, Any] = {}  # JAX: the values the last step returned
        self._current: dict[str, Any] | None = None  # JAX: inside a step being traced

    @property
    def carried(self) -> bool:
        """Whether the entries travel with the step's state (JAX) rather than in variables."""
        return self.backend == "jax"

    def add(self, name: str, shape: tuple[int, ...], dtype: str, initial: float = 0.0) -> None:
        """A new entry, filled with ``initial``."""
        entry = _Entry(tuple(shape), dtype, initial)
        self._entries[name] = entry
        value = np.full(entry.shape, initial, dtype=dtype)
        if self.carried:
            import jax.numpy as jnp

            self._held[name] = jnp.asarray(value)
        else:
            self._variables[name] = keras.Variable(
                value, dtype=dtype, trainable=False, name=name.replace("/", "_")
            )

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    @property
    def names(self) -> list[str]:
        """The entries, in the order they were added."""
        return list(self._entries)

    # ----- inside the step -----

    def get(self, name: str) -> Any:
        """The entry's value as the step sees it (a tensor, traced under a compiled step)."""
        if self._current is not None:
            return self._current[name]
        return self._variables[name].value

    def set(self, name: str, value: Any) -> None:
        """Give the entry a new value from inside the step."""
        if self._current is not None:
            self._current[name] = value
        else:
            self._variables[name].assign(value)

    @property
    def in_step(self) -> bool:
        """Whether the step can read and write the entries now (JAX: only inside a step that
        carries them; elsewhere always)."""
        return not self.carried or self._current is not None

    def enter(self, values: tuple[Any, ...]) -> None:
        """JAX: a carried step starts with ``values`` (in entry order)."""
        self._current = dict(zip(self._entries, values, strict=True))

    def leave(self) -> tuple[Any, ...]:
        """JAX: the carried step ends; its new values, in entry order."""
        assert self._current is not None
        values = tuple(self._current[name] for name in self._entries)
        self._current = None
        return values

    # ----- between steps, on the host -----

    def values(self) -> tuple[Any, ...]:
        """JAX: the values to pass the next step (in entry order)."""
        return tuple(self._held[name] for name in self._entries)

    def keep(self, values: tuple[Any, ...]) -> None:
        """JAX: the values a step returned (in entry order)."""
        self._held = dict(zip(self._entries, values, strict=True))

    def read(self, name: str) -> np.ndarray:
        """A host copy of the entry's value after the last step."""
        value = self._held[name] if self.carried else self._variables[name].value
        if self.backend == "tensorflow":
            return np.array(value.numpy(), copy=True)  # half the time of convert_to_numpy
        return np.array(keras.ops.convert_to_numpy(value), copy=True)

    def write(self, name: str, value: float | np.ndarray) -> None:
        """Set the entry from the host, between steps."""
        entry = self._entries[name]
        array = np.asarray(value, dtype=entry.dtype).reshape(entry.shape)
        if self.carried:
            import jax.numpy as jnp

            self._held[name] = jnp.asarray(array)
        else:
            self._variables[name].assign(array)

    def latest(self, name: str) -> Any:
        """The entry's backend value after the last step, unread (TensorFlow, PyTorch)."""
        return self._variables[name].value


class CarriedStepFunction:
    """A JAX train or test function of Keras's, with the hook's entries carried along.

    Keras calls it as it calls its own, ``(state, iterator) -> (logs, state)``; the function it
    wraps was made from a step that takes and returns the state with the entries appended, and
    returns ``(logs, summary)`` (``summary``: the published entry, or None) as its outputs.
    ``on_summary`` receives each summary, unread (a device array).
    """

    def __init__(
        self,
        inner: Callable[..., Any],
        step_state: StepState,
        on_summary: Callable[[Any], None] | None = None,
    ) -> None:
        self.inner = inner
        self.step_state = step_state
        self.on_summary = on_summary

    def __call__(self, state: tuple[Any, ...], iterator: Any) -> tuple[Any, tuple[Any, ...]]:
        outputs, returned = self.inner((*state, self.step_state.values()), iterator)
        *kept, carried = returned
        self.step_state.keep(carried)
        logs, summary = outputs
        if summary is not None and self.on_summary is not None:
            self.on_summary(summary)
        return logs, tuple(kept)
