"""Rules about how a network learns: VanishingGradient, WeightUpdateRatio, PoorWeightInitialization.

They read the ``gradients`` and ``weights`` collections (or, for output written without them,
the PyTorch hook's names: ``gradient/...`` and parameters named ``...weight``). Gradients and
weight updates exist only in training, so WeightUpdateRatio and PoorWeightInitialization are
fed the TRAIN (and GLOBAL) steps.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.selection import TensorSelection, loss_selection
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.module_types_file import ACTIVATION_TYPES

__all__ = ["PoorWeightInitialization", "VanishingGradient", "WeightUpdateRatio"]

GRADIENTS = TensorSelection(collections=("gradients",), patterns=(re.compile(r"^gradient/"),))
"""The gradients collection, plus the hook's gradient names should the collection be missing."""


def _weights(trial: Trial) -> TensorSelection:
    if "weights" in trial.collections():
        return TensorSelection(collections=("weights",))
    return TensorSelection(patterns=(re.compile(r"^(?!gradient).*weight"),))


_BIAS = re.compile(r"bias(?=(_grad)?$)")

INVARIANCE_RATIO = 1e3
"""How many times larger than a bias's gradient its layer's weight gradient must be for the
bias to count as one the loss is invariant to (see VanishingGradient)."""

NEVER_NONZERO = (
    "while their gradient was exactly 0 and had never been non-zero, and other gradients were "
    "not (a zero-initialised branch before its first update, or a parameter the loss does not "
    "reach)"
)
INVARIANT_BIAS = (
    "biases whose gradient was below threshold while their layer's weight gradient was above "
    f"it and over {INVARIANCE_RATIO:g} times larger (the loss is invariant to such a bias: one "
    "before a normalisation, or attention's key bias under softmax)"
)
NOT_FINITE = "gradients that were not finite (ExplodingTensor is the rule for those)"
ZERO_WEIGHT = (
    "weights that were exactly 0 at the earlier step (zero-initialised, as the last BatchNorm of "
    "a timm residual block: an update has no size to be compared with)"
)


class VanishingGradient(BuiltinRule):
    """Fires when a gradient's mean absolute value is below ``threshold``.

    Uses the saved ``abs_mean`` reduction when there is one, the raw gradient otherwise.

    Some gradients are zero or tiny by construction in a healthy model, and are set aside
    rather than judged (the status names them, and why):

    - a gradient exactly 0 that has never been non-zero, at a step where some other gradient
      is at or above ``threshold``: a branch behind a zero-initialised layer (timm zeroes the
      last BatchNorm of each residual block) gets no gradient until the first update, and an
      unused parameter none at all. Once non-zero, the tensor is judged like any other; a
      gradient that falls to 0 later fires.
    - a bias whose mean |g| is below ``threshold`` while its layer's weight gradient (the same
      name with ``weight`` for ``bias``) is at or above ``threshold`` and over
      ``INVARIANCE_RATIO`` times larger. Both share the layer's output gradient; the weight's
      is it times the layer's inputs, so a vanishing output gradient shrinks both. Only a
      loss invariant to the bias (a bias before a normalisation, attention's ``key.bias``
      under softmax) makes the bias's alone vanish, to rounding noise.
    - a non-finite gradient: neither vanishing nor not (ExplodingTensor is the rule for it).

    A genuinely vanishing gradient (a deep sigmoid network's first layers) still fires: its
    weight and bias are tiny together, and were non-zero.
    """

    modes = (ModeKeys.TRAIN, ModeKeys.GLOBAL)

    def __init__(
        self,
        base_trial: Trial,
        threshold: float | str = 0.0000001,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters("VanishingGradient", {"threshold": threshold})
        self.threshold = parameters.real("threshold")
        self._nonzero: set[str] = set()

    def invoke_at_step(self, step: int) -> bool:
        """Whether a gradient's mean |g| is below ``threshold`` at ``step``."""
        names = GRADIENTS.names(self.base_trial, step)
        if not names:
            raise self.insufficient(
                f"no gradients were saved at {self.step_words(step)}: save the gradients collection"
            )
        means: dict[str, float] = {}
        not_finite = False
        for name in names:
            mean = self.reduction(name, step, "mean", of_abs=True)
            if mean is None:
                continue
            if not math.isfinite(mean):
                not_finite = True
                self.set_aside(NOT_FINITE, name, step)
                continue
            means[name] = mean
        if not means and not_finite:
            raise self.insufficient(
                f"every gradient saved at {self.step_words(step)} is NaN or infinite "
                "(ExplodingTensor is "
                "the rule for those)"
            )
        if not means:
            raise self.insufficient(
                "neither the gradients nor their abs_mean reduction were saved at "
                f"{self.step_words(step)}"
            )
        others_alive = any(mean >= self.threshold for mean in means.values())
        fired = False
        for name, mean in means.items():
            if mean != 0:
                self._nonzero.add(name)
            if mean >= self.threshold:
                continue
            why = self._by_construction(name, mean, means, others_alive)
            if why is not None:
                self.set_aside(why, name, step)
                continue
            fired = True
            self.record(
                message=(
                    f"{name}: mean |g| = {number(mean)} < threshold "
                    f"{number(self.threshold)} at {self.step_words(step)}"
                ),
                tensor=name,
                step=step,
                value=mean,
                threshold=self.threshold,
            )
        return fired

    def _by_construction(
        self, name: str, mean: float, means: dict[str, float], others_alive: bool
    ) -> str | None:
        """Why gradient ``name`` (below threshold) is small by construction, or None."""
        if mean == 0 and name not in self._nonzero and others_alive:
            return NEVER_NONZERO
        weight = means.get(_BIAS.sub("weight", name)) if _BIAS.search(name) else None
        if weight is not None and weight >= self.threshold and weight > INVARIANCE_RATIO * mean:
            return INVARIANT_BIAS
        return None


class WeightUpdateRatio(BuiltinRule):
    """Fires when the ratio of a weight's update to the weight is too large or too small.

    ``ratio = ||w_s - w_p|| / (||w_p|| + epsilon)`` (L2 norms over all elements), where s is the
    step evaluated and p the previous step the weight was saved at; with ``num_steps``, p is the
    earliest saved step at or after ``s - num_steps``. Fires when ``ratio > large_threshold`` or
    ``ratio < small_threshold``. It needs the raw weights at two training steps, so save the
    weights collection with ``train.save_interval`` equal to ``num_steps`` (or 1).

    A weight exactly 0 at the earlier step (zero-initialised, as timm's last BatchNorm of a
    residual block) is set aside, and the status names it: its ratio would measure only
    ``epsilon``.
    """

    modes = (ModeKeys.TRAIN, ModeKeys.GLOBAL)

    def __init__(
        self,
        base_trial: Trial,
        num_steps: int | str | None = None,
        large_threshold: float | str = 10.0,
        small_threshold: float | str = 0.00000001,
        epsilon: float | str = 0.000000001,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "WeightUpdateRatio",
            {
                "num_steps": num_steps,
                "large_threshold": large_threshold,
                "small_threshold": small_threshold,
                "epsilon": epsilon,
            },
        )
        self.num_steps = parameters.optional_integer("num_steps")
        self.large_threshold = parameters.real("large_threshold")
        self.small_threshold = parameters.real("small_threshold")
        self.epsilon = parameters.real("epsilon")
        self._seen: dict[str, list[int]] = {}

    def _previous(self, name: str, step: int) -> int | None:
        seen = self._seen.get(name, [])
        earlier = seen[: bisect_left(seen, step)]
        if not earlier:
            return None
        if self.num_steps is None:
            return earlier[-1]
        position = bisect_left(earlier, step - self.num_steps)
        return earlier[position] if position < len(earlier) else None

    def invoke_at_step(self, step: int) -> bool:
        """Whether a weight's update ratio between the previous saved step and ``step`` is out
        of bounds."""
        if self.base_trial.mode(step) not in self.modes:
            return False
        names = _weights(self.base_trial).names(self.base_trial, step)
        if not names:
            raise self.insufficient(
                f"no weights were saved at {self.step_words(step)}: save the weights collection"
            )
        fired = False
        compared = False
        for name in names:
            current = self.value(name, step)
            if current is None:
                continue
            previous_step = self._previous(name, step)
            seen = self._seen.setdefault(name, [])
            if not seen or seen[-1] < step:
                seen.append(step)
            if previous_step is None:
                continue
            previous = self.value(name, previous_step)
            if previous is None or previous.shape != current.shape:
                continue
            size = float(np.linalg.norm(previous.astype(np.float64).reshape(-1)))
            if size == 0:
                self.set_aside(ZERO_WEIGHT, name, step)
                continue
            compared = True
            update = float(np.linalg.norm((current.astype(np.float64) - previous).reshape(-1)))
            ratio = update / (size + self.epsilon)
            if ratio > self.large_threshold:
                fired = True
                self._record(name, previous_step, step, ratio, ">", "large", self.large_threshold)
            elif ratio < self.small_threshold:
                fired = True
                self._record(name, previous_step, step, ratio, "<", "small", self.small_threshold)
        if not compared:
            raise self.insufficient(
                f"no weight was saved (raw) both at {self.step_words(step)} and at an earlier "
                "training step"
                + ("" if self.num_steps is None else f" at most {self.num_steps} steps before")
            )
        return fired

    def _record(
        self, name: str, before: int, step: int, ratio: float, sign: str, which: str, bound: float
    ) -> None:
        self.record(
            message=(
                f"{name}: update/weight ratio {number(ratio)} {sign} {which}_threshold "
                f"{number(bound)} between {self.step_words(before)} and {self.step_words(step)}"
            ),
            tensor=name,
            step=step,
            value=ratio,
            threshold=bound,
        )


class PoorWeightInitialization(BuiltinRule):
    """Fires when the first ``steps`` steps show that the weights were badly initialized.

    At each training step below ``steps`` it checks three signs, and fires on any of them:

    - the variances of the activation inputs (``activation_inputs_regex``; with its default,
      also the inputs of every activation module the hook recorded, ``nn.ReLU``, ``nn.Tanh``,
      ...) differ across layers by a factor above ``threshold`` (largest variance / smallest);
    - the gradients (all their non-zero values at the step, as one distribution: an exact 0 is
      an embedding row not looked up or a branch not reached yet, not a sign of the
      initialisation) have a 5th-to-95th percentile spread below ``distribution_range``;
    - a loss has not reached a new minimum for ``patience`` saved steps.
    """

    modes = (ModeKeys.TRAIN, ModeKeys.GLOBAL)

    def __init__(
        self,
        base_trial: Trial,
        activation_inputs_regex: Sequence[str] | str | None = (".*relu_input",),
        threshold: float | str = 10.0,
        distribution_range: float | str = 0.001,
        patience: int | str = 5,
        steps: float | str = 10,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "PoorWeightInitialization",
            {
                "activation_inputs_regex": activation_inputs_regex,
                "threshold": threshold,
                "distribution_range": distribution_range,
                "patience": patience,
                "steps": steps,
            },
        )
        self.activation_inputs_regex = parameters.texts("activation_inputs_regex")
        self.threshold = parameters.real("threshold")
        self.distribution_range = parameters.real("distribution_range")
        self.patience = parameters.integer("patience")
        self.steps = parameters.real("steps")
        by_type = parameters.is_default("activation_inputs_regex")
        self.activations = TensorSelection(
            patterns=parameters.patterns("activation_inputs_regex"),
            module_types=ACTIVATION_TYPES if by_type else frozenset(),
            side="input",
        )
        self._best_loss: dict[str, float] = {}
        self._since_best: dict[str, int] = {}

    def invoke_at_step(self, step: int) -> bool:
        """Whether ``step`` (one of the first ``steps``) shows a sign of poor initialization."""
        if step >= self.steps or self.base_trial.mode(step) not in self.modes:
            return False
        judged = [
            self._check_variances(step),
            self._check_gradients(step),
            self._check_losses(step),
        ]
        if not any(found is not None for found in judged):
            raise self.insufficient(
                f"no {self.activations.describe()}, gradients or losses were saved at "
                f"{self.step_words(step)}"
            )
        return any(judged)

    def _check_variances(self, step: int) -> bool | None:
        variances: dict[str, float] = {}
        for name in self.activations.names(self.base_trial, step):
            variance = self.reduction(name, step, "variance")
            if variance is not None and math.isfinite(variance):
                variances[name] = variance
        if len(variances) < 2:
            return None
        low_name = min(variances, key=variances.__getitem__)
        high_name = max(variances, key=variances.__getitem__)
        low, high = variances[low_name], variances[high_name]
        if high == 0:
            return False
        ratio = math.inf if low == 0 else high / low
        if ratio <= self.threshold:
            return False
        self.record(
            message=(
                f"activation input variances differ by a factor of {number(ratio)} > threshold "
                f"{number(self.threshold)} at {self.step_words(step)}: {high_name} {number(high)}, "
                f"{low_name} {number(low)}"
            ),
            tensor=low_name,
            step=step,
            value=ratio,
            threshold=self.threshold,
        )
        return True

    def _check_gradients(self, step: int) -> bool | None:
        names, parts = [], []
        for name in GRADIENTS.names(self.base_trial, step):
            value = self.value(name, step)
            if value is not None and value.size:
                names.append(name)
                parts.append(np.asarray(value, dtype=np.float64).reshape(-1))
        if not parts:
            return None
        # One distribution: every gradient value of the step, whichever layer it belongs to.
        values = np.concatenate(parts)
        nonzero = values[values != 0]
        low, high = np.percentile(nonzero if nonzero.size else values, [5, 95])
        spread = float(high - low)
        if spread >= self.distribution_range:
            return False
        self.record(
            message=(
                f"the 5th-95th percentile spread of the gradients ({len(names)} tensors) is "
                f"{number(spread)} < distribution_range {number(self.distribution_range)} at "
                f"{self.step_words(step)}"
            ),
            tensor=names[0] if len(names) == 1 else None,
            step=step,
            value=spread,
            threshold=self.distribution_range,
        )
        return True

    def _check_losses(self, step: int) -> bool | None:
        fired: bool | None = None
        for name in loss_selection(self.base_trial).names(self.base_trial, step):
            value = self.value(name, step)
            if value is None or value.size != 1:
                continue
            loss = float(value.reshape(-1)[0])
            fired = bool(fired)
            best = self._best_loss.get(name)
            if best is None or loss < best:
                self._best_loss[name] = loss
                self._since_best[name] = 0
                continue
            self._since_best[name] += 1
            if self._since_best[name] >= self.patience:
                fired = True
                self.record(
                    message=(
                        f"{name}: the loss has not decreased for {self._since_best[name]} saved "
                        f"steps (patience {self.patience}) at {self.step_words(step)}; best "
                        f"{number(best)}, now {number(loss)}"
                    ),
                    tensor=name,
                    step=step,
                    value=self._since_best[name],
                    threshold=self.patience,
                )
        return fired
