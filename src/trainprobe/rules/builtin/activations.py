"""Rules about activation layers: DeadRelu and SaturatedActivation.

Both look at one saved batch at a time. The first axis of an activation tensor is the batch
(the samples); every other element is a unit. A unit's *activity* is the percentage of samples
for which it is active: a ReLU output above 0, or a tanh / sigmoid input inside the range where
the function still has a gradient. A unit whose activity is below ``threshold_inactivity`` is
dead (ReLU) or saturated (tanh, sigmoid); the rule fires when more than ``threshold_layer``
percent of a layer's units are.

Activations are found by what they are as well as by name: with the default ``tensor_regex``,
DeadRelu also checks the outputs of every ``nn.ReLU`` / ``nn.ReLU6`` module and
SaturatedActivation the inputs of every ``nn.Tanh`` / ``nn.Sigmoid`` module, whatever their
names (``body.1_output_0`` in an ``nn.Sequential``), from the module types the PyTorch hook
records. SaturatedActivation tells a tanh from a sigmoid by the module's type, else by name.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.selection import TensorSelection
from trainprobe.storage.module_types_file import RELU_TYPES, SIGMOID_TYPES, TANH_TYPES

__all__ = ["DeadRelu", "SaturatedActivation", "unit_activity"]


def unit_activity(active: np.ndarray) -> np.ndarray:
    """Per unit, the percentage of samples (first axis) for which ``active`` is True.

    A tensor of one dimension or none is one sample.
    """
    samples = active.reshape(active.shape[0], -1) if active.ndim >= 2 else active.reshape(1, -1)
    return np.asarray(100.0 * samples.mean(axis=0), dtype=np.float64)


class _ActivationRule(BuiltinRule):
    """Shared by the two rules: find the layers, judge each, record those that fail."""

    selection: TensorSelection
    threshold_inactivity: float
    threshold_layer: float
    failing_word: str

    def active(self, name: str, value: np.ndarray) -> np.ndarray | None:
        """Which elements of ``value`` are active; None to skip the tensor."""
        raise NotImplementedError

    def invoke_at_step(self, step: int) -> bool:
        """Whether more than ``threshold_layer`` percent of a layer's units fail at ``step``."""
        names = self.selection.names(self.base_trial, step)
        if not names:
            raise self.insufficient(
                f"no tensor of {self.selection.describe()} was saved at {self.step_words(step)}"
            )
        fired = False
        judged = False
        unknown: list[str] = []
        for name in names:
            value = self.value(name, step)
            if value is None or value.size == 0:
                continue
            active = self.active(name, value)
            if active is None:
                unknown.append(name)
                continue
            judged = True
            activity = unit_activity(active)
            failing = 100.0 * float(np.mean(activity < self.threshold_inactivity))
            if failing > self.threshold_layer:
                fired = True
                samples = value.shape[0] if value.ndim >= 2 else 1
                self.record(
                    message=(
                        f"{name}: {number(failing)}% of its {activity.size} units are "
                        f"{self.failing_word} (active for less than "
                        f"{number(self.threshold_inactivity)}% of {samples} samples) at step "
                        f"{step}, more than threshold_layer {number(self.threshold_layer)}%"
                    ),
                    tensor=name,
                    step=step,
                    value=failing,
                    threshold=self.threshold_layer,
                )
        if not judged and unknown:
            raise self.insufficient(
                f"{', '.join(unknown[:3])} matched, but {self.rule_name} cannot tell which "
                "activation they belong to: neither a recorded module type (nn.Tanh, "
                "nn.Sigmoid) nor the name says tanh or sigmoid"
            )
        if not judged:
            raise self.insufficient(
                f"the values of {self.selection.describe()} were not saved at "
                f"{self.step_words(step)} "
                f"({self.rule_name} needs the raw activations, not reductions)"
            )
        return fired


class DeadRelu(_ActivationRule):
    """Fires when more than ``threshold_layer`` percent of a layer's ReLUs are dead.

    A ReLU unit is dead at a step when its output is above 0 for less than
    ``threshold_inactivity`` percent of the batch. The PyTorch hook names a ReLU module's
    output ``<module>_output_0`` (``relu_output_0``), which the default pattern matches; with
    that default, the outputs of every ``nn.ReLU`` module count too, whatever its name.
    """

    failing_word = "dead"

    def __init__(
        self,
        base_trial: Trial,
        tensor_regex: Sequence[str] | str | None = (".*relu_output",),
        threshold_inactivity: float | str = 1.0,
        threshold_layer: float | str = 50.0,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "DeadRelu",
            {
                "tensor_regex": tensor_regex,
                "threshold_inactivity": threshold_inactivity,
                "threshold_layer": threshold_layer,
            },
        )
        self.tensor_regex = parameters.texts("tensor_regex")
        self.threshold_inactivity = parameters.real("threshold_inactivity")
        self.threshold_layer = parameters.real("threshold_layer")
        self.selection = TensorSelection(
            patterns=parameters.patterns("tensor_regex"),
            module_types=RELU_TYPES if parameters.is_default("tensor_regex") else frozenset(),
            side="output",
        )

    def active(self, name: str, value: np.ndarray) -> np.ndarray | None:
        """A ReLU is active where its output is above 0."""
        return np.asarray(value > 0)


class SaturatedActivation(_ActivationRule):
    """Fires when more than ``threshold_layer`` percent of a tanh or sigmoid layer's units are
    saturated.

    The rule reads the activation's input. A unit is saturated at a step when its input lies
    inside (``threshold_<fn>_min``, ``threshold_<fn>_max``) for less than
    ``threshold_inactivity`` percent of the batch; outside that range the function's gradient is
    below about 1e-7. Whether a tensor feeds a tanh or a sigmoid is read from the module type
    the hook recorded, else from its name (``tanh_input_0``, ``sigmoid_input_0``); tensors
    known as neither are skipped.
    """

    failing_word = "saturated"

    def __init__(
        self,
        base_trial: Trial,
        collection_names: Sequence[str] | str | None = None,
        tensor_regex: Sequence[str] | str | None = (".*tanh_input|.*sigmoid_input",),
        threshold_tanh_min: float | str = -9.4999,
        threshold_tanh_max: float | str = 9.4999,
        threshold_sigmoid_min: float | str = -23,
        threshold_sigmoid_max: float | str = 16.99999,
        threshold_inactivity: float | str = 1.0,
        threshold_layer: float | str = 50.0,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "SaturatedActivation",
            {
                "collection_names": collection_names,
                "tensor_regex": tensor_regex,
                "threshold_tanh_min": threshold_tanh_min,
                "threshold_tanh_max": threshold_tanh_max,
                "threshold_sigmoid_min": threshold_sigmoid_min,
                "threshold_sigmoid_max": threshold_sigmoid_max,
                "threshold_inactivity": threshold_inactivity,
                "threshold_layer": threshold_layer,
            },
        )
        self.collection_names = parameters.texts("collection_names")
        self.tensor_regex = parameters.texts("tensor_regex")
        self.threshold_tanh_min = parameters.real("threshold_tanh_min")
        self.threshold_tanh_max = parameters.real("threshold_tanh_max")
        self.threshold_sigmoid_min = parameters.real("threshold_sigmoid_min")
        self.threshold_sigmoid_max = parameters.real("threshold_sigmoid_max")
        self.threshold_inactivity = parameters.real("threshold_inactivity")
        self.threshold_layer = parameters.real("threshold_layer")
        by_type = not self.collection_names and parameters.is_default("tensor_regex")
        self.selection = TensorSelection(
            collections=self.collection_names,
            patterns=parameters.patterns("tensor_regex"),
            module_types=TANH_TYPES | SIGMOID_TYPES if by_type else frozenset(),
            side="input",
        )

    def bounds(self, name: str) -> tuple[float, float] | None:
        """The (min, max) input range of the activation ``name`` feeds; None if unknown.

        The module's recorded type decides (nn.Tanh, nn.Sigmoid); failing that, the name."""
        kind = self.base_trial.module_nn_type(name)
        if kind in TANH_TYPES:
            return self.threshold_tanh_min, self.threshold_tanh_max
        if kind in SIGMOID_TYPES:
            return self.threshold_sigmoid_min, self.threshold_sigmoid_max
        lowered = name.lower()
        is_tanh, is_sigmoid = "tanh" in lowered, "sigmoid" in lowered
        if is_tanh and not is_sigmoid:
            return self.threshold_tanh_min, self.threshold_tanh_max
        if is_sigmoid and not is_tanh:
            return self.threshold_sigmoid_min, self.threshold_sigmoid_max
        return None

    def active(self, name: str, value: np.ndarray) -> np.ndarray | None:
        """A unit is active where its input is strictly inside the activation's range."""
        bounds = self.bounds(name)
        if bounds is None:
            self.logger.debug("%s: not named like a tanh or sigmoid input; skipped", name)
            return None
        low, high = bounds
        return np.asarray((value > low) & (value < high))
