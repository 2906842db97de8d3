"""Values the training's own compiled step hands the hook: the applied gradients and the loss.

Under ``tf.function`` and ``jax.jit`` Python code inside the step runs only while the step is
traced, so a value can leave the step only through a variable the step writes. The taps are such
variables, written where Keras itself computes the values, on every backend:

- **gradients**: the optimizer's ``_backend_update_step`` (every built-in trainer reaches it with
  the gradients it applies: after gradient accumulation's averaging, clipping and loss-scale
  unscaling) also copies each gradient into a variable made with
  ``optimizer.add_variable_from_reference``, but only while the ``capture`` flag is on. On
  TensorFlow the copy is a ``tf.cond`` on a flag variable; on JAX the flag is an optimizer
  variable too (JAX's state is the optimizer's variables) and the copies a ``lax.cond``; on
  PyTorch, which runs eagerly, the flag is a Python attribute. Steps that save no gradient pay
  the condition only. The optimizer's saved state leaves these variables out
  (``save_own_variables``), so checkpoints stay those of the training alone.
- **the batch's loss**: the model's loss tracker (the ``Mean`` whose running value Keras logs as
  ``loss``) gets a variable that its ``update_state`` sets to the batch's own loss, in training
  and evaluation; with gradient accumulation, a running sum and count over the update's
  micro-batches give their mean.

Installing the taps changes the training's compiled step, so the trainer's step functions are
made again (once, before the first step of ``fit`` or ``evaluate``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras
from keras import ops

__all__ = ["GradientTap", "LossTap"]

_GRADIENT = "trainprobe_gradient"


class GradientTap:
    """Copies of the gradients the optimizer applies, taken while ``capture`` is on."""

    def __init__(self, model: Any, optimizer: Any, backend: str) -> None:
        self.backend = backend
        self.optimizer = optimizer
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        kept = len(optimizer.variables)
        self.variables = list(model.trainable_variables)
        self.copies = [
            optimizer.add_variable_from_reference(variable, name=_GRADIENT)
            for variable in self.variables
        ]
        self._flag = (
            optimizer.add_variable((), initializer="zeros", dtype="int32", name="trainprobe_flag")
            if backend != "torch"
            else None
        )
        self._on = False
        self._keep_saved_state(kept)
        self._wrap_update_step()

    @property
    def capture(self) -> bool:
        """Whether the next updates copy their gradients."""
        return self._on

    def set_capture(self, on: bool) -> None:
        """Copy (or not) the gradients of the updates from now on (JAX: state already synced)."""
        if on == self._on:
            return
        self._on = on
        if self._flag is not None:
            self._flag.assign(1 if on else 0)

    def _keep_saved_state(self, kept: int) -> None:
        """The optimizer saves its own variables only: the taps (added after them) stay out."""
        optimizer = self.optimizer
        save = optimizer.save_own_variables

        def save_own_variables(store: Any) -> None:
            save(store)
            for key in [key for key in store if key.isdigit() and int(key) >= kept]:
                del store[key]

        optimizer.save_own_variables = save_own_variables

    def _wrap_update_step(self) -> None:
        optimizer = self.optimizer
        update = optimizer._backend_update_step
        copies = {
            id(variable): copy for variable, copy in zip(self.variables, self.copies, strict=True)
        }
        take = self._taker()

        def update_step(grads: Sequence[Any], variables: Sequence[Any], rate: Any) -> Any:
            result = update(grads, variables, rate)
            pairs = [
                (grad, copies[id(variable)])
                for grad, variable in zip(grads, variables, strict=True)
                if grad is not None and id(variable) in copies
            ]
            take(pairs)
            return result

        optimizer._backend_update_step = update_step

    def _taker(self) -> Callable[[list[tuple[Any, Any]]], None]:
        flag = self._flag
        if self.backend == "torch":

            def take_eagerly(pairs: list[tuple[Any, Any]]) -> None:
                if self._on:
                    for grad, copy in pairs:
                        copy.assign(grad)

            return take_eagerly
        assert flag is not None
        if self.backend == "jax":
            from jax import lax

            def take_stateless(pairs: list[tuple[Any, Any]]) -> None:
                values = lax.cond(
                    flag.value > 0,
                    lambda: [grad for grad, _ in pairs],
                    lambda: [copy.value for _, copy in pairs],
                )
                for value, (_, copy) in zip(values, pairs, strict=True):
                    copy.assign(value)

            return take_stateless

        def take_in_graph(pairs: list[tuple[Any, Any]]) -> None:
            def copy_all() -> None:
                for grad, copy in pairs:
                    copy.assign(grad)

            ops.cond(flag.value > 0, copy_all, lambda: None)

        return take_in_graph


class LossTap:
    """The loss of the batch that just ran (the mean of an update's micro-batches' losses)."""

    def __init__(self, model: Any, accumulation: int) -> None:
        tracker = model._loss_tracker
        self.tracker = tracker
        self.last = self._variable("float32", "trainprobe_batch_loss")
        self.total = self._variable("float32", "trainprobe_step_loss")
        self.count = self._variable("int32", "trainprobe_step_batches")
        self.batches = self._variable("int32", "trainprobe_batches")
        update = tracker.update_state
        steps = max(int(accumulation), 1)

        def update_state(values: Any, sample_weight: Any = None) -> Any:
            result = update(values, sample_weight=sample_weight)
            loss = ops.cast(ops.mean(values), "float32")
            # A new update starts with this batch when the batches so far fill whole updates.
            keep = ops.cast(ops.not_equal(ops.mod(self.batches.value, steps), 0), "float32")
            self.last.assign(loss)
            self.total.assign(self.total.value * keep + loss)
            self.count.assign(self.count.value * ops.cast(keep, "int32") + 1)
            self.batches.assign(self.batches.value + 1)
            return result

        tracker.update_state = update_state

    def align(self, micro_batches: int) -> None:
        """Count the training's micro-batches from ``micro_batches`` (the optimizer's own count,
        read where the state is synced: evaluation batches go through the tracker too)."""
        self.batches.assign(micro_batches)

    def _variable(self, dtype: str, name: str) -> keras.Variable:
        return self.tracker.add_variable((), initializer="zeros", dtype=dtype, name=name)

    @property
    def variables(self) -> list[Any]:
        """The variables to read, in the order ``loss_of`` takes their values."""
        return [self.last, self.total, self.count]

    @staticmethod
    def loss_of(last: float, total: float, count: int, accumulated: bool) -> float:
        """The step's loss from the variables' values."""
        if accumulated and count > 0:
            return total / count
        return last
