"""The in-training checks, as the compiled step runs them: the non-finite check and the spike rules.

Once per TRAIN step, inside the training's own step (``tf.function``, ``jax.jit``, or PyTorch's
eager step), on what the step computed anyway: the batch's loss (the mean of an update's
micro-batches) and the gradients the optimizer is about to apply. A constant number of small
operations whatever the model's size (in the compiled steps one fused reduction per gradient,
on PyTorch one ``torch._foreach_norm`` over them all):

- **the non-finite check**: whether the loss and each gradient are finite. The first update
  where one is not is kept, with the first gradient that was not in backward order (the last in
  the model's layers' order) and whether the loss was; and the first update whose loss was not;
- **the spike rules** (``LossSpike``, ``GradientNormSpike``): the loss, or the norm of the
  update's gradients, against a rolling window of the healthy values before it, judged as
  ``capture.spike_window.SpikeWindow`` judges (the same warm-up, two-sided z-score, ratio, a
  value that is not finite always a spike, spikes left out of the window), the window a ring
  buffer in the step's state, in float32;
- **the decision**: whether the update is skipped, where a rule's action says so (SkipStep;
  Rollback, which the Keras hook does not do, skips too) or once a StopTraining rule has fired
  (every update after it is skipped until the training stops, so the last weights are the
  healthy ones). Made in the step, so it takes effect on this very update.

Everything the host needs goes into one small vector, the step's summary (``SUMMARY_FIELDS``,
then ``RULE_FIELDS`` per rule), read on the host later (``capture.keras.in_training``): a clean
step costs the training no wait. Where reading a value costs nothing (Keras's PyTorch backend on
the CPU), ``host_checks.HostChecks`` makes the same decisions on the host instead, in a handful of
operations a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from keras import ops

from trainprobe.capture.in_training_rules import SpikeRuleConfig
from trainprobe.capture.keras.step_state import StepState
from trainprobe.storage.spike_records import SpikeAction

__all__ = [
    "RULE_FIELDS",
    "SUMMARY_FIELDS",
    "CheckedRules",
    "Observation",
    "StepChecks",
    "gradient_norms",
]

SUMMARY_FIELDS = (
    "update",  # the last update judged
    "first_update",  # the first update with a non-finite loss or gradient (-1: none yet)
    "first_gradient",  # the first of its gradients that was not finite, in backward order
    "first_gradient_value",  # that gradient's measure (NaN or infinity)
    "first_loss",  # the loss of that update
    "loss_update",  # the first update whose loss was not finite (-1: none yet)
    "loss_value",  # that loss
    "stop_update",  # the update where a StopTraining rule fired (-1: none)
)
RULE_FIELDS = ("update", "value", "mean", "std", "z", "warm", "action", "spikes", "judged")
"""Per rule: its last spike (update, value, window mean, deviation, z, warm, action), the count
of its spikes and of the updates it judged."""

_FOUND = "checks/found"
_STOP = "checks/stop"
_SUMMARY = "checks/summary"


@dataclass
class Observation:
    """What an update shows the checks, in the step: its index, whether it updates (not a
    micro-batch in between), each gradient's measure (finite exactly when the gradient is) and
    the gradients' norm."""

    update: Any
    is_update: Any
    measures: Any | None
    norm: Any | None


def gradient_norms(gradients: Sequence[Any], backend: str) -> Any:
    """Each gradient's l2 norm, in float32, as one vector (PyTorch: one fused operation)."""
    if backend == "torch":
        import torch

        norms = torch._foreach_norm(list(gradients), 2, dtype=torch.float32)
        return torch.stack(list(norms))
    return ops.stack([ops.sqrt(ops.sum(ops.square(ops.cast(g, "float32")))) for g in gradients])


def _measures(gradients: Sequence[Any], backend: str) -> Any:
    """One number per gradient that is finite exactly when the gradient is (short of an
    overflow), NaN when it holds a NaN: its l1 norm (PyTorch: its l2 norm, one fused
    operation), as one float32 vector."""
    if backend == "torch":
        return gradient_norms(gradients, backend)
    return ops.stack([ops.sum(ops.abs(ops.cast(g, "float32"))) for g in gradients])


class CheckedRules:
    """What one model's checks judge: the non-finite check (``guard``) and the spike ``rules``,
    over ``gradient_count`` gradients; ``StepChecks`` judges them in the step, ``HostChecks``
    on the host."""

    def __init__(
        self, gradient_count: int, rules: Sequence[SpikeRuleConfig], *, guard: bool
    ) -> None:
        self.guard = guard
        self.rules = list(rules)
        self.gradient_count = gradient_count

    @property
    def needs_norm(self) -> bool:
        """Whether a rule judges the gradients' norm."""
        return any(not rule.judges_loss for rule in self.rules)

    @property
    def may_skip(self) -> bool:
        """Whether an update may be skipped: a rule's action decides the step."""
        return any(rule.action is not SpikeAction.NONE for rule in self.rules)

    @property
    def summary_size(self) -> int:
        """The summary's length: ``SUMMARY_FIELDS``, then ``RULE_FIELDS`` for each rule."""
        return len(SUMMARY_FIELDS) + len(RULE_FIELDS) * len(self.rules)


class StepChecks(CheckedRules):
    """The checks of one model's training (see the module docstring): their entries in the
    step's state, their judgement, and where their summary lies."""

    def __init__(
        self,
        step_state: StepState,
        gradient_count: int,
        rules: Sequence[SpikeRuleConfig],
        *,
        guard: bool,
    ) -> None:
        super().__init__(gradient_count, rules, guard=guard)
        self.state = step_state
        step_state.add(_FOUND, (6,), "float32", -1.0)
        step_state.add(_STOP, (), "float32", -1.0)
        for index, rule in enumerate(self.rules):
            step_state.add(f"checks/{index}/buffer", (rule.settings.window,), "float32")
            step_state.add(f"checks/{index}/count", (), "int32")
            step_state.add(f"checks/{index}/position", (), "int32")
            step_state.add(f"checks/{index}/last", (len(RULE_FIELDS),), "float32", -1.0)
        step_state.add(_SUMMARY, (self.summary_size,), "float32", -1.0)

    @property
    def summary_name(self) -> str:
        """The step state's entry that holds the summary."""
        return _SUMMARY

    def observe(
        self,
        gradients: Sequence[Any],
        positions: Sequence[int],
        update: Any,
        is_update: Any,
        backend: str,
    ) -> Observation:
        """What the checks need of the update's ``gradients`` (``positions``: each one's place
        among the checked gradients)."""
        finite = norm = None
        if self.guard and gradients:
            finite = _measures(gradients, backend)
            if list(positions) != list(range(self.gradient_count)):  # some without a gradient
                places = ops.convert_to_tensor([[p] for p in positions], "int32")
                finite = ops.scatter(places, finite, (self.gradient_count,))
        if self.needs_norm and gradients:
            norm = ops.sqrt(ops.sum(ops.square(gradient_norms(gradients, backend))))
        return Observation(update, is_update, finite, norm)

    def judge(self, observation: Observation, loss: Any | None) -> Any:
        """Judge the update: the new state, and whether to skip it (a boolean tensor)."""
        state = self.state
        update = ops.cast(observation.update, "float32")
        mask = ops.convert_to_tensor(observation.is_update)
        found = state.get(_FOUND)
        if self.guard:
            found = self._nonfinite(found, observation, loss, update, mask)
            state.set(_FOUND, found)
        skip = ops.convert_to_tensor(False)
        stop = ops.convert_to_tensor(False)
        rows = []
        for index, rule in enumerate(self.rules):
            value = loss if rule.judges_loss else observation.norm
            spike, row = self._rule(index, rule, value, update, mask)
            rows.append(row)
            if rule.action in (SpikeAction.SKIP, SpikeAction.ROLLBACK):
                skip = ops.logical_or(skip, spike)
            elif rule.action is SpikeAction.STOP:
                stop = ops.logical_or(stop, spike)
        stopped = state.get(_STOP)
        stopped = ops.where(ops.logical_and(stop, stopped < 0), update, stopped)
        state.set(_STOP, stopped)
        header = ops.concatenate([ops.reshape(update, (1,)), found, ops.reshape(stopped, (1,))])
        state.set(_SUMMARY, ops.concatenate([header, *rows]) if rows else header)
        return ops.logical_or(skip, stopped >= 0)

    def _nonfinite(
        self, found: Any, observation: Observation, loss: Any | None, update: Any, mask: Any
    ) -> Any:
        """``found`` (the ``SUMMARY_FIELDS`` after ``update``, up to ``loss_value``) after this
        update."""
        bad = ops.convert_to_tensor(False)
        loss_value = ops.convert_to_tensor(0.0)
        if loss is not None:
            loss_value = ops.cast(ops.reshape(loss, ()), "float32")
            bad = ops.logical_not(ops.isfinite(loss_value))
        loss_bad = bad
        gradient, measure = ops.convert_to_tensor(-1.0), ops.convert_to_tensor(0.0)
        if observation.measures is not None:
            broken = ops.logical_not(ops.isfinite(observation.measures))
            bad = ops.logical_or(bad, ops.any(broken))
            places = ops.arange(self.gradient_count, dtype="float32")
            gradient = ops.max(ops.where(broken, places, -1.0))
            measure = ops.take(observation.measures, ops.cast(ops.maximum(gradient, 0), "int32"))
        fresh = ops.logical_and(ops.logical_and(mask, bad), found[0] < 0)
        newly = ops.logical_and(ops.logical_and(mask, loss_bad), found[4] < 0)
        return ops.stack(
            [
                ops.where(fresh, update, found[0]),
                ops.where(fresh, gradient, found[1]),
                ops.where(fresh, measure, found[2]),
                ops.where(fresh, loss_value, found[3]),
                ops.where(newly, update, found[4]),
                ops.where(newly, loss_value, found[5]),
            ]
        )

    def _rule(
        self, index: int, rule: SpikeRuleConfig, value: Any | None, update: Any, mask: Any
    ) -> tuple[Any, Any]:
        """The rule's verdict on ``value`` (no spike when there is none); its summary row."""
        state, settings = self.state, rule.settings
        last = state.get(f"checks/{index}/last")
        if value is None:
            return ops.convert_to_tensor(False), last
        prefix = f"checks/{index}"
        buffer = state.get(f"{prefix}/buffer")
        count = state.get(f"{prefix}/count")
        position = state.get(f"{prefix}/position")
        value = ops.cast(ops.reshape(value, ()), "float32")
        slots = ops.arange(settings.window, dtype="int32")
        held = ops.minimum(count, settings.window)
        inside = slots < held
        number = ops.cast(ops.maximum(held, 1), "float32")
        mean = ops.sum(ops.where(inside, buffer, 0.0)) / number
        variance = ops.sum(ops.where(inside, ops.square(buffer - mean), 0.0)) / number
        floor = ops.maximum(ops.abs(mean) * 1e-6, 1e-12)
        std = ops.maximum(ops.sqrt(variance), floor)
        finite = ops.isfinite(value)
        z = (ops.where(finite, value, mean) - mean) / std
        warm = held >= max(settings.warmup, 2)
        outlying = ops.abs(z) > settings.sigma
        if settings.ratio > 0:
            outlying = ops.logical_or(outlying, value > settings.ratio * mean)
        spike = ops.logical_or(ops.logical_not(finite), ops.logical_and(warm, outlying))
        spike = ops.logical_and(mask, spike)
        healthy = ops.logical_and(mask, ops.logical_not(spike))
        here = ops.logical_and(healthy, ops.equal(slots, position))
        state.set(f"{prefix}/buffer", ops.where(here, value, buffer))
        entered = ops.cast(healthy, "int32")
        state.set(f"{prefix}/position", (position + entered) % settings.window)
        state.set(f"{prefix}/count", count + entered)
        action = float(rule.action.strength)
        spikes = ops.maximum(last[7], 0.0) + ops.cast(spike, "float32")
        judged = ops.maximum(last[8], 0.0) + ops.cast(mask, "float32")
        warm_flag = ops.cast(warm, "float32")
        fresh = ops.stack([update, value, mean, std, z, warm_flag, action, spikes, judged])
        kept = ops.concatenate([last[:7], ops.stack([spikes, judged])])  # no spike: counts only
        row = ops.where(spike, fresh, kept)
        state.set(f"{prefix}/last", row)
        return spike, row
