"""Rules about the data fed to the model: CheckInputImages and NLPSequenceRatio.

Both read a model input tensor. The PyTorch hook names the input of a module
``<module>_input_0`` (``conv1_input_0``, ``embedding_input_0``; the model itself by its class,
``Net_input_0``); the rules' defaults are MXNet's names, so set ``regex`` / ``tensor_regex`` to
yours and save the tensor (``include_regex``, or a collection that matches it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.config.errors import ConfigError
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.selection import TensorSelection

__all__ = ["CheckInputImages", "NLPSequenceRatio"]


@dataclass
class _ChannelSums:
    """Running per-channel sums over the images seen."""

    sums: np.ndarray
    values: int = 0
    images: int = 0


class CheckInputImages(BuiltinRule):
    """Fires when input images do not look normalized: a channel's mean is far from 0.

    Over every step, it adds up the input tensor (``regex``) per channel (axis ``channel``;
    the batch is the first other axis). Once ``threshold_samples`` images have been seen, it
    fires when the absolute mean of some channel is above ``threshold_mean``.
    """

    def __init__(
        self,
        base_trial: Trial,
        threshold_mean: float | str = 0.2,
        threshold_samples: int | str = 500,
        regex: str = ".*hybridsequential0_input_0",
        channel: int | str = 1,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "CheckInputImages",
            {
                "threshold_mean": threshold_mean,
                "threshold_samples": threshold_samples,
                "regex": regex,
                "channel": channel,
            },
        )
        self.threshold_mean = parameters.real("threshold_mean")
        self.threshold_samples = parameters.integer("threshold_samples")
        self.regex = parameters.text("regex")
        self.channel = parameters.integer("channel")
        self.selection = TensorSelection(patterns=parameters.patterns("regex"))
        self._seen: dict[str, _ChannelSums] = {}

    def _add(self, name: str, value: np.ndarray) -> bool:
        if value.ndim < 2 or self.channel >= value.ndim:
            self.logger.debug(
                "%s has shape %s: no channel axis %d", name, value.shape, self.channel
            )
            return False
        batch_axis = 1 if self.channel == 0 else 0
        per_channel = np.moveaxis(value.astype(np.float64), self.channel, 0)
        per_channel = per_channel.reshape(per_channel.shape[0], -1)
        seen = self._seen.get(name)
        if seen is None or seen.sums.shape[0] != per_channel.shape[0]:
            seen = self._seen[name] = _ChannelSums(np.zeros(per_channel.shape[0]))
        seen.sums += per_channel.sum(axis=1)
        seen.values += per_channel.shape[1]
        seen.images += value.shape[batch_axis]
        return True

    def invoke_at_step(self, step: int) -> bool:
        """Whether, with the images seen up to ``step``, a channel's mean is too far from 0."""
        added = False
        for name in self.selection.names(self.base_trial, step):
            value = self.value(name, step)
            if value is not None and value.size:
                added |= self._add(name, value)
        if not added:
            raise self.insufficient(
                f"no image batch (names matching {self.regex}, with a channel axis "
                f"{self.channel}) was saved at {self.step_words(step)}"
            )
        fired = False
        for name, seen in self._seen.items():
            if seen.images < self.threshold_samples:
                continue
            self.has_judged = True
            means = seen.sums / seen.values
            for index, mean in enumerate(means):
                if abs(mean) > self.threshold_mean:
                    fired = True
                    self.record(
                        message=(
                            f"{name}: channel {index} has mean {number(mean)} over "
                            f"{seen.images} images, |mean| > threshold_mean "
                            f"{number(self.threshold_mean)}; the inputs look unnormalized "
                            f"(at {self.step_words(step)})"
                        ),
                        tensor=name,
                        step=step,
                        value=float(mean),
                        threshold=self.threshold_mean,
                    )
        images = max(seen.images for seen in self._seen.values())
        return fired or self.nothing_due(
            f"{images} image(s) seen up to {self.step_words(step)}, fewer than threshold_samples "
            f"{self.threshold_samples}: CheckInputImages judges the channel means over that many"
        )


class NLPSequenceRatio(BuiltinRule):
    """Fires when given tokens make up too much of the input sequences.

    At each step, for each input tensor (``tensor_regex``) and each of ``token_values``, it
    computes the percentage of the tensor's elements equal to the token (padding, unknown
    words) and fires when it is above the token's entry in ``token_thresholds_percent`` (one
    threshold applies to every token).
    """

    def __init__(
        self,
        base_trial: Trial,
        tensor_regex: Sequence[str] | str | None = (".*embedding0_input_0",),
        token_values: Sequence[float] | str | None = (0,),
        token_thresholds_percent: Sequence[float] | str | None = (50,),
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "NLPSequenceRatio",
            {
                "tensor_regex": tensor_regex,
                "token_values": token_values,
                "token_thresholds_percent": token_thresholds_percent,
            },
        )
        self.tensor_regex = parameters.texts("tensor_regex")
        self.token_values = parameters.reals("token_values")
        thresholds = parameters.reals("token_thresholds_percent")
        if len(thresholds) == 1:
            thresholds = thresholds * len(self.token_values)
        if len(thresholds) != len(self.token_values):
            raise ConfigError(
                "NLPSequenceRatio.token_thresholds_percent",
                token_thresholds_percent,
                f"expected one threshold, or one per token value ({len(self.token_values)})",
            )
        self.token_thresholds_percent = thresholds
        self.selection = TensorSelection(patterns=parameters.patterns("tensor_regex"))

    def invoke_at_step(self, step: int) -> bool:
        """Whether a token's share of an input tensor at ``step`` is above its threshold."""
        fired = False
        judged = False
        for name in self.selection.names(self.base_trial, step):
            value = self.value(name, step)
            if value is None or value.size == 0:
                continue
            judged = True
            for token, threshold in zip(
                self.token_values, self.token_thresholds_percent, strict=True
            ):
                percent = 100.0 * float(np.count_nonzero(value == token)) / value.size
                if percent > threshold:
                    fired = True
                    self.record(
                        message=(
                            f"{name}: token {number(token)} is {number(percent)}% of the "
                            f"{value.size} tokens at {self.step_words(step)}, more than its "
                            "threshold "
                            f"{number(threshold)}%"
                        ),
                        tensor=name,
                        step=step,
                        value=percent,
                        threshold=threshold,
                    )
        if not judged:
            raise self.insufficient(
                f"no input sequence ({self.selection.describe()}) was saved at "
                f"{self.step_words(step)}"
            )
        return fired
