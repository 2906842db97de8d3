"""Hand-made trials for the built-in rule tests, and evaluating a rule over a trial's steps.

A ``TrialBuilder`` writes real smdebug-format output with ``StepWriter`` (one event file and
index per step), a collections file and the end-of-training marker, then opens it with
``create_trial``. ``fired_steps`` feeds a rule every saved step, in order, the way the engine's
runner does: only the steps of the rule's ``modes``, skipping steps it cannot judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.rules import InsufficientInformationForRuleInvocation, Rule
from trainprobe.rules.rule import Evidence, take_evidence
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end
from trainprobe.trials import create_trial

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL


@dataclass
class TrialBuilder:
    """Collects tensors by step, then writes them as one worker's trial."""

    path: Path
    _steps: dict[int, tuple[ModeKeys, dict[str, np.ndarray]]] = field(default_factory=dict)
    _collections: dict[str, dict[str, object]] = field(default_factory=dict)

    def add(self, step: int, name: str, value: object, mode: ModeKeys = TRAIN) -> TrialBuilder:
        """Save ``name`` = ``value`` at global ``step`` (every tensor of a step shares a mode)."""
        known_mode, tensors = self._steps.setdefault(step, (mode, {}))
        assert known_mode == mode, f"step {step} is already a {known_mode.name} step"
        tensors[name] = np.asarray(value)
        return self

    def series(
        self, name: str, values: Mapping[int, object], mode: ModeKeys = TRAIN
    ) -> TrialBuilder:
        """Save ``name`` at each step of ``values`` ({step: value})."""
        for step, value in values.items():
            self.add(step, name, value, mode)
        return self

    def collection(
        self, name: str, *, regex: Iterable[str] = (), names: Iterable[str] = ()
    ) -> TrialBuilder:
        """Declare collection ``name`` in the collections file."""
        self._collections[name] = {
            "name": name,
            "include_regex": list(regex),
            "tensor_names": list(names),
            "reduction_config": None,
            "save_config": None,
            "save_histogram": True,
        }
        return self

    def write(self, *, end: bool = True) -> Trial:
        """Write everything (and the end-of-training marker unless ``end`` is False)."""
        out = str(self.path)
        # As the hook counts: a mode's step is the global step less the steps of other modes
        # before it (a step not saved is taken to be of the mode of the next one saved).
        others: dict[ModeKeys, int] = {}
        for step in sorted(self._steps):
            mode, tensors = self._steps[step]
            mode_step = step - others.get(mode, 0)
            for other in ModeKeys:
                if other != mode:
                    others[other] = others.get(other, 0) + 1
            writer = StepWriter(out, step, "worker_0")
            for name, value in tensors.items():
                writer.add(name, value, mode=mode, mode_step=step if mode == GLOBAL else mode_step)
            writer.close()
        write_collections_file(out, "worker_0", self._collections, 1)
        if end:
            write_training_end(out)
        return create_trial(out)


def fired_steps(rule: Rule, trial: Trial | None = None) -> list[int]:
    """The saved steps at which ``rule`` fires, evaluating each step in order; then, as the
    runner does once the training has ended, what only the end completes (a loss rule's last
    evaluation pass, counted at the last step)."""
    trial = trial or rule.base_trial
    fired = []
    last = None
    for step in trial.steps():
        if rule.modes is not None and trial.mode(step) not in rule.modes:
            continue
        last = step
        try:
            if rule.evaluate(step):
                fired.append(step)
        except InsufficientInformationForRuleInvocation:
            continue
    judge_at_end = getattr(rule, "judge_at_end", None)
    if last is not None and callable(judge_at_end):
        try:
            if judge_at_end():
                fired.append(last)
        except InsufficientInformationForRuleInvocation:
            pass
    return fired


def evidence_of(rule: Rule) -> list[Evidence]:
    """What ``rule`` recorded since the last call."""
    return take_evidence(rule)


def scalars(values: Iterable[float], first: int = 0, every: int = 1) -> dict[int, float]:
    """{step: value} for values saved every ``every`` steps from ``first``."""
    return {first + every * index: value for index, value in enumerate(values)}
