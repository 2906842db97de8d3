"""The in-training checks judged on the host, where reading a value costs the step nothing.

On Keras's PyTorch backend the step runs eagerly, one dispatched operation at a time, and on the
CPU reading a value is free: there the checks take the loss and one fused norm of the gradients
(``torch._foreach_norm``) as Python numbers and judge them with ``capture.spike_window``'s
``SpikeWindow`` itself (the reference the rule's evaluator and the PyTorch hook judge by), in a
handful of operations a step instead of the device judgement's few dozen. Everything else is
``step_checks.StepChecks``'s: the same decisions, the same summary (``SUMMARY_FIELDS``, then
``RULE_FIELDS`` per rule), held here as a numpy vector.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from trainprobe.capture.in_training_rules import SpikeRuleConfig
from trainprobe.capture.keras.step_checks import (
    RULE_FIELDS,
    CheckedRules,
    Observation,
    gradient_norms,
)
from trainprobe.capture.spike_window import SpikeWindow
from trainprobe.storage.spike_records import SpikeAction

__all__ = ["HostChecks"]


class HostChecks(CheckedRules):
    """``StepChecks`` for a step whose values the host reads for free (see the module
    docstring); its ``summary`` is the latest."""

    def __init__(
        self, gradient_count: int, rules: Sequence[SpikeRuleConfig], *, guard: bool
    ) -> None:
        super().__init__(gradient_count, rules, guard=guard)
        self._windows = [SpikeWindow(rule.settings) for rule in self.rules]
        self._rows = [[-1.0] * (len(RULE_FIELDS) - 2) + [0.0, 0.0] for _ in self.rules]
        self._found = [-1.0] * 6
        self._stopped = -1.0
        self.summary = np.full(self.summary_size, -1.0)

    def observe(
        self,
        gradients: Sequence[Any],
        positions: Sequence[int],
        update: Any,
        is_update: Any,
        backend: str,
    ) -> Observation:
        """The update's index and each gradient's l2 norm (in ``positions``), as numbers."""
        measures = None
        if gradients and (self.guard or self.needs_norm):
            norms = gradient_norms(gradients, backend).tolist()
            measures = [0.0] * self.gradient_count
            for position, norm in zip(positions, norms, strict=True):
                measures[position] = norm
        norm = math.sqrt(sum(m * m for m in measures)) if measures and self.needs_norm else None
        return Observation(int(update), bool(is_update), measures, norm)

    def judge(self, observation: Observation, loss: Any | None) -> bool:
        """Judge the update; whether to skip it."""
        if not observation.is_update:
            return self._stopped >= 0
        update = float(observation.update)
        value = None if loss is None else float(loss)
        if self.guard:
            self._nonfinite(observation.measures, value, update)
        skip = stop = False
        rows = []
        for index, rule in enumerate(self.rules):
            judged = value if rule.judges_loss else observation.norm
            spike = judged is not None and self._rule(index, rule, judged, update)
            rows += self._rows[index]
            if rule.action in (SpikeAction.SKIP, SpikeAction.ROLLBACK):
                skip = skip or spike
            elif rule.action is SpikeAction.STOP:
                stop = stop or spike
        if stop and self._stopped < 0:
            self._stopped = update
        self.summary = np.asarray([update, *self._found, self._stopped, *rows], dtype=np.float64)
        return skip or self._stopped >= 0

    def _nonfinite(self, measures: list[float] | None, loss: float | None, update: float) -> None:
        found = self._found
        loss_bad = loss is not None and not math.isfinite(loss)
        broken = [i for i, m in enumerate(measures or []) if not math.isfinite(m)]
        if found[0] < 0 and (loss_bad or broken):
            gradient = broken[-1] if broken else -1  # the last in the layers' order
            measure = measures[gradient] if measures and broken else 0.0
            found[:4] = [update, float(gradient), measure, 0.0 if loss is None else loss]
        if loss is not None and loss_bad and found[4] < 0:
            found[4:] = [update, loss]

    def _rule(self, index: int, rule: SpikeRuleConfig, value: float, update: float) -> bool:
        verdict = self._windows[index].judge(value)
        row = self._rows[index]
        row[-1] += 1  # judged
        if verdict.spike:
            row[-2] += 1  # spikes
            mean, std, z = verdict.mean, verdict.std, verdict.z
            warm = mean is not None and std is not None
            row[:-2] = [
                update, value, mean if mean is not None else -1.0,
                std if std is not None else -1.0, z if z is not None else 0.0,
                1.0 if warm else 0.0, float(rule.action.strength),
            ]  # fmt: skip
        return verdict.spike
