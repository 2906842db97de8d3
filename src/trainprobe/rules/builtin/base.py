"""What the built-in rules share: typed parameters, reading values safely, and numbers in words.

Each built-in rule declares the catalogue's parameters in its constructor. ``Parameters`` runs
whatever it was given (Python values, or the strings of ``RuleParameters``) through the
catalogue, so a rule built by hand is checked exactly as one built by the engine, and a bad
value raises ConfigError naming ``<Rule>.<parameter>``.

``BuiltinRule`` reads tensors the way the rules need: the raw value or a reduction, whichever
was saved, or None when neither was (a rule skips such a tensor instead of failing the step).
It also keeps what a rule set aside without judging, and why (``set_aside``), so the rule's
status can say so (``remarks``): a rule never passes quietly over a tensor it did not judge.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trainprobe.analysis.exceptions import (
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from trainprobe.analysis.trial import Trial
from trainprobe.config import catalogue
from trainprobe.config.errors import ConfigError
from trainprobe.rules.rule import InsufficientInformationForRuleInvocation, Rule

__all__ = ["BuiltinRule", "Parameters", "compile_patterns", "number"]

_NAMES_SHOWN = 3

_MISSING = (TensorUnavailable, TensorUnavailableForStep, StepUnavailable)


def number(value: float) -> str:
    """A number as a person reads it in a verdict: 4 significant digits, ``nan``, ``inf``."""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"


def compile_patterns(field: str, patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    """The regular expressions in ``patterns``; ConfigError on ``field`` for one that is not."""
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as error:
            raise ConfigError(field, pattern, f"expected a regular expression ({error})") from None
    return tuple(compiled)


def _comparable(value: object) -> object:
    return tuple(value) if isinstance(value, list | tuple) else value


class Parameters:
    """A rule's constructor arguments, converted and checked by the catalogue.

    Arguments left at None take the catalogue's default; everything else goes through
    ``RuleSpec.convert``, which accepts the strings SageMaker sends (``"1e-7"``, ``"True"``,
    ``"a,b"``) as well as Python values, and reports every bad value at once.
    """

    def __init__(self, rule: str, given: Mapping[str, object]) -> None:
        self.rule = rule
        spec = catalogue.get(rule)
        raw = {name: value for name, value in given.items() if value is not None}
        self._defaults = spec.defaults()
        self._values: dict[str, Any] = {
            **spec.defaults(),
            **spec.convert(raw, field_prefix=rule),
        }

    def is_default(self, name: str) -> bool:
        """Whether parameter ``name`` has its catalogue default (given or not)."""
        return _comparable(self._values[name]) == _comparable(self._defaults[name])

    def real(self, name: str) -> float:
        """Parameter ``name`` as a float."""
        return float(self._values[name])

    def optional_real(self, name: str) -> float | None:
        """Parameter ``name`` as a float, or None when it is unset."""
        value = self._values[name]
        return None if value is None else float(value)

    def integer(self, name: str) -> int:
        """Parameter ``name`` as an int."""
        return int(self._values[name])

    def optional_integer(self, name: str) -> int | None:
        """Parameter ``name`` as an int, or None when it is unset."""
        value = self._values[name]
        return None if value is None else int(value)

    def flag(self, name: str) -> bool:
        """Parameter ``name`` as a bool."""
        return bool(self._values[name])

    def text(self, name: str) -> str:
        """Parameter ``name`` as a string."""
        return str(self._values[name])

    def optional_text(self, name: str) -> str | None:
        """Parameter ``name`` as a string, or None when it is unset."""
        value = self._values[name]
        return None if value is None else str(value)

    def texts(self, name: str) -> tuple[str, ...]:
        """Parameter ``name`` as a tuple of strings (empty when unset)."""
        value = self._values[name]
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        return tuple(str(item) for item in value)

    def reals(self, name: str) -> tuple[float, ...]:
        """Parameter ``name`` as a tuple of floats (empty when unset)."""
        value = self._values[name]
        if value is None:
            return ()
        return tuple(float(item) for item in value)

    def patterns(self, name: str) -> tuple[re.Pattern[str], ...]:
        """Parameter ``name`` (one regex or a list of them) compiled."""
        return compile_patterns(f"{self.rule}.{name}", self.texts(name))


class BuiltinRule(Rule):
    """A rule of the catalogue: ``Rule`` plus safe reads of values and reductions."""

    def __init__(
        self,
        base_trial: Trial,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials=other_trials, action_str=action_str)
        self._set_aside: dict[str, dict[str, list[int]]] = {}
        self.has_judged = False
        """Whether the rule has yet had the data its judgement needs (two losses ``num_steps``
        apart, ``samples`` labels, ...): see ``nothing_due``."""

    def nothing_due(self, why: str) -> bool:
        """For a step with nothing due to judge: False (this step passes) once the rule has
        judged (``has_judged``), else InsufficientInformation saying ``why`` (the step is
        skipped). So a rule never ends NoIssuesFound before it has reached its own minimum:
        with nothing judged, it ends in Error saying why."""
        if self.has_judged:
            return False
        raise self.insufficient(why)

    def set_aside(self, why: str, tensor: str, step: int) -> None:
        """Say that ``tensor`` was not judged at ``step``, for the reason ``why`` (a phrase that
        completes "set aside ..."); ``remarks`` reports it."""
        steps = self._set_aside.setdefault(why, {}).setdefault(tensor, [])
        if not steps or steps[-1] != step:
            steps.append(step)

    def remarks(self) -> list[str]:
        """What the rule set aside and why, one sentence per reason (the rule's status ends
        with them)."""
        said = []
        for why, tensors in self._set_aside.items():
            names = sorted(tensors)
            shown = ", ".join(names[:_NAMES_SHOWN])
            if len(names) > _NAMES_SHOWN:
                shown += f" ({len(names)} in all)"
            steps = sorted({step for found in tensors.values() for step in found})
            said.append(f"Set aside {why}, at {self.steps_words(steps)}: {shown}.")
        return said

    def steps_words(self, steps: Sequence[int]) -> str:
        """Global steps as the training counts them: ``TRAIN step 0``, ``TRAIN step 0 and
        TRAIN step 10``, ``10 steps, from TRAIN step 0 to TRAIN step 90``."""
        if len(steps) == 1:
            return self.step_words(steps[0])
        if len(steps) == 2:
            return f"{self.step_words(steps[0])} and {self.step_words(steps[1])}"
        return (
            f"{len(steps)} steps, from {self.step_words(steps[0])} to {self.step_words(steps[-1])}"
        )

    def value(self, name: str, step: int, trial: Trial | None = None) -> np.ndarray | None:
        """Tensor ``name``'s raw value at global ``step``, or None when it was not saved."""
        try:
            return (trial or self.base_trial).tensor(name).value(step)
        except _MISSING:
            return None

    def reduction(self, name: str, step: int, op: str, *, of_abs: bool = False) -> float | None:
        """Reduction ``op`` of tensor ``name`` at ``step``: the saved one, else computed from
        the saved value; None when neither was saved. A variance also comes from a saved std."""
        tensor = self.base_trial.tensor(name)
        try:
            return float(tensor.reduction_value(step, op, abs=of_abs))
        except _MISSING:
            pass
        if op == "variance":
            try:
                return float(tensor.reduction_value(step, "std", abs=of_abs)) ** 2
            except _MISSING:
                return None
        return None

    def saved_reductions(self, name: str, step: int) -> dict[tuple[str, bool], float]:
        """Every reduction saved for ``name`` at ``step``, keyed by (name, abs)."""
        try:
            found = self.base_trial.tensor(name).reduction_values(step)
        except _MISSING:
            return {}
        return {key: float(np.asarray(value).reshape(-1)[0]) for key, value in found.items()}

    def insufficient(self, message: str) -> InsufficientInformationForRuleInvocation:
        """The exception that says this step cannot be judged, and what to save so it can."""
        return InsufficientInformationForRuleInvocation(self.rule_name, message)
