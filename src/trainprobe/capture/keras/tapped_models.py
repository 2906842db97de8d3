"""Which taps the Keras hook puts into which model, and what it reads back from them.

A hook follows the models its callbacks are given (``fit``, ``evaluate``, ``predict``, usually
one). Each model gets its loss tap the first time it trains or evaluates; the model ``fit``
trains also gets its optimizer's taps: the copies of the applied gradients when a saved
collection may hold a gradient, and the in-training checks when they are on (the non-finite
check by default, the spike rules when configured). Installing taps remakes the trainer's step
functions, once per model, optimizer and loss tracker (a model compiled again gets new taps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainprobe.capture.collections import CollectionKeys
from trainprobe.capture.in_training_rules import SpikeRuleConfig
from trainprobe.capture.keras import naming
from trainprobe.capture.keras.host_checks import HostChecks
from trainprobe.capture.keras.in_training import InTrainingChecks, Reports
from trainprobe.capture.keras.step_checks import StepChecks
from trainprobe.capture.keras.step_state import StepState
from trainprobe.capture.keras.taps import Checks, StepTaps
from trainprobe.capture.save_plan import SavePlan

__all__ = ["CheckSettings", "TappedModels"]


@dataclass(frozen=True)
class CheckSettings:
    """The in-training checks a hook runs: the non-finite check (``guard``), the spike rules."""

    guard: bool = True
    rules: tuple[SpikeRuleConfig, ...] = field(default=())

    @property
    def on(self) -> bool:
        """Whether any check runs."""
        return self.guard or bool(self.rules)


class TappedModels:
    """The taps of the hook's models (see the module docstring)."""

    def __init__(
        self, backend: str, plan: SavePlan, checks: CheckSettings, reports: Reports
    ) -> None:
        self.backend = backend
        self.plan = plan
        self.checks = checks
        self.reports = reports
        self.training: StepTaps | None = None
        """The taps of the model ``fit`` trains."""
        self.optimizer: Any = None
        """Its optimizer, as the user made it."""
        self.host_checks: InTrainingChecks | None = None
        self._taps: dict[tuple[int, int, int], StepTaps] = {}

    def taps_of(self, model: Any) -> StepTaps | None:
        """The taps of ``model`` as it is compiled now, if it has any."""
        return self._taps.get(_key(model))

    def tap(self, model: Any, *, training: bool) -> None:
        """Install what ``model`` needs for a training (``training``) or an evaluation."""
        key = _key(model)
        taps = self._taps.get(key)
        remake = taps is None
        if taps is None:
            taps = self._taps[key] = StepTaps(model, self.backend)
        optimizer = getattr(model, "optimizer", None)
        if training and optimizer is not None and taps.optimizer is None:
            self._tap_optimizer(model, optimizer, taps)
            remake = True
        if training:
            self.training = taps
            self.optimizer = optimizer
        if remake:
            taps.remake(training)

    def _tap_optimizer(self, model: Any, optimizer: Any, taps: StepTaps) -> None:
        checks = self.checks
        checked = [
            (name, variable)
            for name, _, variable in naming.model_variables(model)
            if variable.trainable
        ]
        make_checks = None
        if checks.on:
            first = checked[0][1] if checked else None
            on_host = self.backend == "torch" and _on_the_cpu(first)

            def make_checks(state: StepState, count: int) -> Checks:
                if on_host:
                    return HostChecks(count, checks.rules, guard=checks.guard)
                return StepChecks(state, count, checks.rules, guard=checks.guard)

        taps.tap_optimizer(
            optimizer,
            gradients=self._wants_gradients(model),
            checks=make_checks,
            checked=[variable for _, variable in checked],
        )
        if taps.checks is not None:
            names = [
                (naming.variable_name(name), naming.gradient_name(name)) for name, _ in checked
            ]
            host = InTrainingChecks(checks.rules, names, self.reports)
            if isinstance(taps.checks, HostChecks):
                host.follow_host(taps.checks)
            else:
                host.follow(taps.state, taps.checks.summary_name)
            taps.on_summary = host.summary_arrived
            self.host_checks = host

    def gradient_names(self, model: Any) -> list[str]:
        """The names of ``model``'s trainable variables' gradients."""
        return [
            naming.gradient_name(name)
            for name, _, variable in naming.model_variables(model)
            if variable.trainable
        ]

    def _wants_gradients(self, model: Any) -> bool:
        """Whether any saved collection may hold a gradient at some step."""
        names = self.gradient_names(model)
        saved = self.plan.saved
        return any(c.matches(name) for c in saved for name in names) or any(
            c.name == CollectionKeys.ALL for c in saved
        )

    def gradient_values(self, model: Any) -> list[tuple[str, Any]]:
        """The copied gradients of the training's last update, by name (host copies)."""
        taps = self.training
        if taps is None or not taps.capture:
            return []
        index_of = {id(variable): i for i, variable in enumerate(taps.gradient_variables)}
        return [
            (naming.gradient_name(name), taps.gradient(index_of[id(variable)]))
            for name, _, variable in naming.model_variables(model)
            if id(variable) in index_of
        ]

    def optimizer_variables(self) -> Sequence[Any]:
        """The training's optimizer's own variables."""
        return list(getattr(self.optimizer, "variables", []))

    def remove(self) -> None:
        """Take every tap out (the models' step functions are made again without them)."""
        for taps in self._taps.values():
            taps.remove()
        self._taps.clear()
        self.training = None


def _key(model: Any) -> tuple[int, int, int]:
    return (
        id(model),
        id(getattr(model, "optimizer", None)),
        id(getattr(model, "_loss_tracker", None)),
    )


def _on_the_cpu(variable: Any) -> bool:
    """Whether a PyTorch backend's variable lives on the CPU (reading its values is free)."""
    device = getattr(getattr(variable, "value", None), "device", None)
    return getattr(device, "type", None) == "cpu"
