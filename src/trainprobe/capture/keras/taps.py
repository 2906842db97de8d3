"""The hook's taps into a Keras model's training step: the loss, the applied gradients, the checks.

Under ``tf.function`` and ``jax.jit`` Python code inside the step runs only while the step is
traced, so the taps are wrappers that put their values into the step's own computation, where
Keras computes them, on every backend, and write them into the hook's ``StepState``:

- **the batch's loss**: the model's loss tracker (the ``Mean`` whose running value Keras logs as
  ``loss``) is given the batch's loss by the train and test steps; its ``update_state`` also
  keeps it (``loss/last``), and, training, the running sum and count over the update's
  micro-batches (gradient accumulation) whose mean is the step's loss;
- **the applied gradients**: the optimizer's ``_backend_update_step`` (every built-in trainer
  reaches it with the gradients it applies: after gradient accumulation's averaging, clipping
  and loss-scale unscaling) also copies each gradient into the step state, but only while the
  ``gradient/flag`` entry says so (TensorFlow: a ``tf.cond``; JAX: a ``lax.cond``; PyTorch,
  eager: a Python attribute); steps that save no gradient pay the condition only;
- **the in-training checks** (``capture.keras.step_checks``): the optimizer's
  ``_backend_apply_gradients`` (before clipping and the update, after loss-scale unscaling)
  shows them the update's gradients. On TensorFlow and PyTorch, whose steps update the loss
  tracker before the optimizer, they judge there and a skipped update does not run (a
  ``tf.cond``; PyTorch reads the decision on the host, as Keras's own ``ops.cond`` does); on
  JAX, whose step updates the tracker after the optimizer, they judge at the end of the step and
  a skipped update's new weights and optimizer state are replaced by the old ones (the JAX
  optimizer skips gradient accumulation's in-between updates the same way). A skipped update
  still counts in the optimizer's ``iterations`` (the TRAIN step stays the training's batch).

The model's ``train_step`` (and on JAX ``test_step``) is wrapped too: it marks the step as
training and, on JAX, carries the step state in and out (``step_state.CarriedStepFunction``).
Installing taps changes the training's compiled step, so the trainer's step functions are made
again (``remake``). Nothing of the model's or the optimizer's own state changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from keras import ops

from trainprobe.capture.keras.host_checks import HostChecks
from trainprobe.capture.keras.step_checks import Observation, StepChecks
from trainprobe.capture.keras.step_state import CarriedStepFunction, StepState

__all__ = ["Checks", "StepTaps"]

Checks = StepChecks | HostChecks
"""The in-training checks, judged in the step (``StepChecks``) or on the host where reading
a value is free (``HostChecks``: PyTorch on the CPU)."""

log = logging.getLogger("trainprobe")

_FLAG = "gradient/flag"


class StepTaps:
    """The taps of one model (see the module docstring): the loss tap at once, the optimizer's
    taps (``tap_optimizer``) once it trains."""

    def __init__(self, model: Any, backend: str) -> None:
        self.model = model
        self.backend = backend
        self.state = StepState(backend)
        self.gradient_variables: list[Any] = []
        self.checks: Checks | None = None
        self.optimizer: Any = None
        self.on_summary: Callable[[Any], None] | None = None
        self._capture = False
        self._training = False
        self._seen: dict[str, Any] = {}
        self._accumulation = 1
        self._kept_anyway: set[int] = set()  # JAX: optimizer variables a skip does not restore
        self._replaced: list[tuple[Any, str, Any, bool]] = []  # (owner, name, before, own)
        for name, dtype in (("last", "float32"), ("total", "float32")):
            self.state.add(f"loss/{name}", (), dtype)
        for name in ("count", "batches"):
            self.state.add(f"loss/{name}", (), "int32")
        self.has_loss = getattr(model, "_loss_tracker", None) is not None
        if self.has_loss:
            self._tap_loss_tracker(model._loss_tracker)
        self._wrap_steps()

    # ----- the optimizer's taps -----

    def tap_optimizer(
        self,
        optimizer: Any,
        *,
        gradients: bool,
        checks: Callable[[StepState, int], Checks] | None,
        checked: Sequence[Any],
    ) -> None:
        """Tap the optimizer: copies of the applied gradients (``gradients``), and the checks
        that ``checks(state, len(checked))`` makes (``checked``: the variables whose gradients
        they check, in the model's layers' order)."""
        inner = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's
        if not inner.built:
            inner.build(self.model.trainable_variables)
        self.optimizer = inner
        self._accumulation = int(getattr(inner, "gradient_accumulation_steps", None) or 1)
        if gradients:
            self.gradient_variables = list(self.model.trainable_variables)
            self.state.add(_FLAG, (), "int32")
            for index, variable in enumerate(self.gradient_variables):
                self.state.add(f"gradient/{index}", tuple(variable.shape), str(variable.dtype))
            self._wrap_update_step(inner)
        if checks is not None:
            self.checks = checks(self.state, len(checked))
            self._wrap_apply(inner, checked)
            kept = [inner._iterations, *(getattr(inner, "_accumulated_gradients", None) or [])]
            self._kept_anyway = {id(variable) for variable in kept if variable is not None}

    @property
    def capture(self) -> bool:
        """Whether the coming updates copy their gradients."""
        return self._capture

    def set_capture(self, on: bool) -> None:
        """Copy (or not) the gradients of the coming updates (JAX: the state already synced)."""
        if on == self._capture or _FLAG not in self.state:
            return
        self._capture = on
        if self.backend != "torch":
            self.state.write(_FLAG, 1 if on else 0)

    def gradient(self, index: int) -> Any:
        """A host copy of the ``index``-th copied gradient."""
        return self.state.read(f"gradient/{index}")

    # ----- the loss -----

    def align(self, micro_batches: int) -> None:
        """Count the training's micro-batches from ``micro_batches`` (the optimizer's own
        count, read where the state is synced)."""
        self.state.write("loss/batches", micro_batches)

    def loss_values(self) -> tuple[float, float, int]:
        """The last batch's loss, and the running sum and count of the update's batches."""
        read = self.state.read
        return float(read("loss/last")), float(read("loss/total")), int(read("loss/count"))

    @staticmethod
    def loss_of(last: float, total: float, count: int, accumulated: bool) -> float:
        """The step's loss from ``loss_values``."""
        if accumulated and count > 0:
            return total / count
        return last

    def _tap_loss_tracker(self, tracker: Any) -> None:
        update = tracker.update_state
        state = self.state

        def update_state(values: Any, sample_weight: Any = None) -> Any:
            result = update(values, sample_weight=sample_weight)
            if state.in_step:
                loss = ops.cast(ops.stop_gradient(ops.mean(values)), "float32")
                state.set("loss/last", loss)
                if self._training:
                    self._count_training_loss(loss)
            return result

        self._replace(tracker, "update_state", update_state)

    def _count_training_loss(self, loss: Any) -> None:
        state, steps = self.state, self._accumulation
        batches = state.get("loss/batches")
        # A new update starts with this batch when the batches so far fill whole updates.
        keep = ops.not_equal(ops.mod(batches, steps), 0)
        state.set("loss/total", state.get("loss/total") * ops.cast(keep, "float32") + loss)
        state.set("loss/count", state.get("loss/count") * ops.cast(keep, "int32") + 1)
        state.set("loss/batches", batches + 1)
        self._seen["loss"] = True

    def _step_loss(self) -> Any | None:
        """The step's loss (the mean over the update's micro-batches), if the step gave one."""
        if not self._seen.get("loss"):
            return None
        count = ops.cast(ops.maximum(self.state.get("loss/count"), 1), "float32")
        return self.state.get("loss/total") / count

    # ----- the steps -----

    def _wrap_steps(self) -> None:
        model = self.model
        train_step, test_step = model.train_step, model.test_step
        carried = self.state.carried

        def hooked_train_step(*args: Any) -> Any:
            self._training = True
            self._seen = {}
            try:
                if not carried:
                    return train_step(*args)
                return self._carry(train_step, args, training=True)
            finally:
                self._training = False

        self._replace(model, "train_step", hooked_train_step)
        if carried:
            self._replace(
                model, "test_step", lambda *args: self._carry(test_step, args, training=False)
            )

    def _replace(self, owner: Any, name: str, value: Any) -> None:
        """Put ``value`` in place of ``owner``'s ``name``, to be put back by ``remove``."""
        self._replaced.append((owner, name, getattr(owner, name), name in vars(owner)))
        setattr(owner, name, value)

    def remove(self) -> None:
        """Put back what the taps replaced; the model's step functions are made again, without
        them, when it next trains or evaluates."""
        for owner, name, before, own in reversed(self._replaced):
            if own:
                setattr(owner, name, before)
            else:
                delattr(owner, name)
        self._replaced = []
        self.model.train_function = self.model.test_function = None

    def _carry(self, step: Callable[..., Any], args: tuple[Any, ...], training: bool) -> Any:
        """JAX: run ``step`` with the step state carried as the last member of its state
        (a step function Keras made without the taps passes its state through as it is)."""
        if len(args[0]) != (5 if training else 4):
            return step(*args)
        (*state, carried), data = args
        self.state.enter(carried)
        try:
            outputs, new_state = step(tuple(state), data)
            if training:
                new_state = self._judge_after(tuple(state), new_state)
        finally:
            values = self.state.leave()
        summary = None
        if training and isinstance(self.checks, StepChecks):
            summary = values[self.state.names.index(self.checks.summary_name)]
        return (outputs, summary), (*new_state, values)

    def remake(self, training: bool) -> None:
        """Make the trainer's step functions again, with the taps (and on JAX, carrying the
        step state)."""
        model = self.model
        model.train_function = model.test_function = None
        if training:
            model.make_train_function(force=True)
        model.make_test_function(force=True)
        if self.state.carried:
            if training:
                model.train_function = CarriedStepFunction(
                    model.train_function, self.state, self._summary_arrived
                )
            model.test_function = CarriedStepFunction(model.test_function, self.state)

    def _summary_arrived(self, summary: Any) -> None:
        if self.on_summary is not None:
            self.on_summary(summary)

    # ----- the optimizer -----

    def _wrap_update_step(self, optimizer: Any) -> None:
        update = optimizer._backend_update_step
        place = {id(variable): index for index, variable in enumerate(self.gradient_variables)}

        def update_step(grads: Sequence[Any], variables: Sequence[Any], rate: Any) -> Any:
            result = update(grads, variables, rate)
            pairs = [
                (grad, f"gradient/{place[id(variable)]}")
                for grad, variable in zip(grads, variables, strict=True)
                if grad is not None and id(variable) in place
            ]
            if self.state.in_step:
                self._copy_gradients(pairs)
            return result

        self._replace(optimizer, "_backend_update_step", update_step)

    def _copy_gradients(self, pairs: list[tuple[Any, str]]) -> None:
        state = self.state
        if self.backend == "torch":
            if self._capture:
                for grad, name in pairs:
                    state.set(name, grad)
            return
        on = state.get(_FLAG) > 0
        if state.carried:
            from jax import lax

            values = lax.cond(
                on, lambda: [grad for grad, _ in pairs], lambda: [state.get(n) for _, n in pairs]
            )
            for value, (_, name) in zip(values, pairs, strict=True):
                state.set(name, value)
            return

        def copy_all() -> None:
            for grad, name in pairs:
                state.set(name, grad)

        ops.cond(on, copy_all, lambda: None)

    def _wrap_apply(self, optimizer: Any, checked: Sequence[Any]) -> None:
        apply = optimizer._backend_apply_gradients
        place = {id(variable): index for index, variable in enumerate(checked)}

        def apply_gradients(grads: Sequence[Any], variables: Sequence[Any]) -> Any:
            checks = self.checks
            if checks is None or not self._training or not self.state.in_step:
                return apply(grads, variables)
            observation = self._observe(optimizer, grads, variables, place)
            if self.state.carried:
                self._seen["observation"] = observation
                return apply(grads, variables)
            skip = checks.judge(observation, self._step_loss())
            if not checks.may_skip:
                return apply(grads, variables)
            if self.backend == "torch":
                if bool(skip):
                    return self._skipped(optimizer, grads, variables)
                return apply(grads, variables)
            ops.cond(
                skip,
                lambda: self._skipped(optimizer, grads, variables),
                lambda: apply(grads, variables),
            )
            return None

        self._replace(optimizer, "_backend_apply_gradients", apply_gradients)

    def _observe(
        self, optimizer: Any, grads: Sequence[Any], variables: Sequence[Any], place: dict[int, int]
    ) -> Observation:
        """The update as the checks see it: the gradients it applies (with accumulation, the
        mean of the update's micro-batches)."""
        assert self.checks is not None
        steps = self._accumulation
        pairs = [
            (grad, variable) for grad, variable in zip(grads, variables, strict=True)
            if grad is not None and id(variable) in place
        ]  # fmt: skip
        applied = [grad for grad, _ in pairs]
        is_update: Any = True
        if steps > 1:
            is_update = ops.equal(ops.mod(optimizer._iterations + 1, steps), 0)
            accumulated = optimizer._accumulated_gradients
            applied = [
                (grad + accumulated[optimizer._get_variable_index(variable)]) / steps
                for grad, variable in pairs
            ]
        positions = [place[id(variable)] for _, variable in pairs]
        update = ops.convert_to_tensor(optimizer.iterations)  # its value now, not the variable
        return self.checks.observe(applied, positions, update, is_update, self.backend)

    def _skipped(self, optimizer: Any, grads: Sequence[Any], variables: Sequence[Any]) -> None:
        """The update does not run; its gradients are still copied where they are wanted (as
        the optimizer got them), and with gradient accumulation its accumulators are reset."""
        if self.gradient_variables:
            place = {id(variable): index for index, variable in enumerate(self.gradient_variables)}
            pairs = [
                (grad, f"gradient/{place[id(variable)]}")
                for grad, variable in zip(grads, variables, strict=True)
                if grad is not None and id(variable) in place
            ]
            self._copy_gradients(pairs)
        if self._accumulation > 1:
            optimizer._backend_reset_gradient_accumulators()

    def _judge_after(self, old: tuple[Any, ...], new: tuple[Any, ...]) -> tuple[Any, ...]:
        """JAX: judge the update at the end of its step; a skipped update keeps the old
        weights and optimizer state (not its iteration count, nor emptied accumulators)."""
        checks, observation = self.checks, self._seen.pop("observation", None)
        if checks is None or observation is None:
            return new
        skip = checks.judge(observation, self._step_loss())
        if not checks.may_skip:
            return new
        trainable, non_trainable, optimizer_values, metrics = new
        variables = self.optimizer.variables
        trainable = [ops.where(skip, o, n) for o, n in zip(old[0], trainable, strict=True)]
        optimizer_values = [
            n if id(variable) in self._kept_anyway else ops.where(skip, o, n)
            for variable, o, n in zip(variables, old[2], optimizer_values, strict=True)
        ]
        return trainable, non_trainable, optimizer_values, metrics
