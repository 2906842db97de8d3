"""LossSpike and GradientNormSpike: what the training judged in its steps, and LossSpike after it.

The hook judges these rules on every step, inside the training, and acts before the spiking
update; it writes each spike, with what it did, under ``<debug-output>/spikes/``
(``trainprobe.storage.spike_records``), with how many steps it judged. Where the training
judged the rule, the evaluator reports that: each spike (step, value, the window's mean and
deviation, the action) as evidence as soon as it is written, and no issue only once the
training judged more steps than ``warmup_steps``.

Where it did not (a training run without the rule, such as ``trainprobe rules run`` on an
earlier job or on smdebug's output), LossSpike judges the saved losses instead, each loss and
mode with its own window, exactly as the hook judges (``trainprobe.capture.spike_window``); a
step whose windows are all still warming up is not judged, so a job with too few saved losses
ends in Error, never NoIssuesFound. GradientNormSpike, whose norms are not saved, then ends in
Error saying how to run it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.capture.spike_window import SpikeSettings, SpikeVerdict, SpikeWindow
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.losses import _LossRule
from trainprobe.rules.builtin.selection import TensorSelection, loss_selection
from trainprobe.storage.modes import ModeKeys, step_in_words
from trainprobe.storage.spike_records import SpikeRecord, read_spike_files
from trainprobe.storage.training_end import training_has_ended

__all__ = ["GradientNormSpike", "LossSpike"]

_SHARED = ("window", "sigma", "warmup_steps", "ratio", "max_skips", "max_skips_window")
"""The parameters both rules take, in the catalogue's order."""

_RECHECK_SECONDS = 1.0
"""While the training runs and no step is saved, how often the spikes are read again."""


class _SpikeRule(BuiltinRule):
    """What both rules share: the settings, and the verdicts the training wrote."""

    def __init__(
        self,
        base_trial: Trial,
        shared: tuple[object, ...],
        other_trials: Sequence[Trial] | None,
        action_str: str,
        **more: object,
    ) -> None:
        """``shared`` holds window, sigma, warmup_steps, ratio, max_skips and
        max_skips_window, in that order; ``more``, the rule's own parameters."""
        super().__init__(base_trial, other_trials, action_str)
        self.parameters = parameters = Parameters(
            self.rule_name, {**more, **dict(zip(_SHARED, shared, strict=True))}
        )
        self.window = parameters.integer("window")
        self.sigma = parameters.real("sigma")
        self.warmup_steps = parameters.integer("warmup_steps")
        self.ratio = parameters.real("ratio")
        self.max_skips = parameters.integer("max_skips")
        self.max_skips_window = parameters.integer("max_skips_window")
        self.settings = SpikeSettings(self.window, self.sigma, self.warmup_steps, self.ratio)
        self.judged_in_training = False
        """Whether the training judged this rule (then its records are the verdict)."""
        self._reported: set[tuple[str, int, str]] = set()
        self._rule_names: dict[str, str] = {}
        self._read_at = 0.0

    def is_this_rule(self, configuration: str) -> bool:
        """Whether a rule configuration named ``configuration`` is this rule: the training says
        which rule each configuration is; an older record is named after it (the job names a
        second one ``LossSpike-2``)."""
        name = self.rule_name
        rule = self._rule_names.get(configuration)
        if rule is not None:
            return rule == name
        return configuration == name or configuration.startswith(f"{name}-")

    def training_verdicts(self) -> tuple[list[SpikeRecord], dict[str, int] | None] | None:
        """The spikes the training recorded for this rule and the steps it judged by mode
        (None when it did not say); None when the training has not judged this rule."""
        path = self.base_trial.path
        spike_files = read_spike_files(path)
        self._rule_names = spike_files.rules
        records = [record for record in spike_files.records if self.is_this_rule(record.rule)]
        judged: dict[str, int] | None = None
        for rule, by_mode in spike_files.judged.items():
            if self.is_this_rule(rule):
                judged = judged or {}
                for mode, count in by_mode.items():
                    judged[mode] = judged.get(mode, 0) + count
        if not records and judged is None and not self.judged_in_training:
            return None
        if not self.judged_in_training:
            self.judged_in_training = True
            # Its verdict reads the training's judgements, not tensors.
            setattr(self, "reads_tensors", False)  # noqa: B010 (a ClassVar, set for this rule)
        return records, judged

    def report_new_spikes(self, records: list[SpikeRecord]) -> bool:
        """Record each spike not yet reported as evidence; whether there was one."""
        workers = {record.worker for record in records}
        new = False
        for record in records:
            key = (record.worker, record.step, record.mode.name)
            if key in self._reported:
                continue
            self._reported.add(key)
            new = True
            said = record.describe()
            self.record(
                message=f"{record.worker}: {said}" if len(workers) > 1 else said,
                step=record.step,
                value=record.value,
            )
        return new

    def judge_by_training(
        self, step: int, records: list[SpikeRecord], judged: dict[str, int] | None
    ) -> bool:
        """The verdict at ``step`` from what the training judged: its new spikes up to
        ``step`` (at the training's last saved step, all of them), else no issue once it
        judged steps beyond the warm-up."""
        if not self._is_last_step(step):
            records = [record for record in records if record.step <= step]
        if self.report_new_spikes(records):
            return True
        if records:
            return False
        beyond = sum(max(0, count - self.warmup_steps) for count in (judged or {}).values())
        if beyond == 0:
            counted = sum((judged or {}).values())
            raise self.insufficient(
                f"the training has judged {counted} step(s) so far, none past warmup_steps "
                f"{self.warmup_steps}"
            )
        return False

    def _is_last_step(self, step: int) -> bool:
        trial = self.base_trial
        if not training_has_ended(trial.path):
            return False
        steps = trial.steps()
        return not steps or step >= steps[-1]

    def check_progress(self) -> bool:
        """While the training runs and saves no step: whether it wrote a new spike (at most
        one look a second)."""
        now = time.monotonic()
        if now - self._read_at < _RECHECK_SECONDS:
            return False
        self._read_at = now
        found = self.training_verdicts()
        return found is not None and self.report_new_spikes(found[0])

    def invoke_at_step(self, step: int) -> bool:
        """Whether the training wrote a new spike of this rule by ``step`` (where it judged the
        rule), else whether the saved values spike at ``step``."""
        found = self.training_verdicts()
        if found is not None:
            return self.judge_by_training(step, *found)
        return self.judge_saved(step)

    def judge_saved(self, step: int) -> bool:
        """The verdict at ``step`` from the saved values, for a training that did not judge."""
        raise NotImplementedError


class LossSpike(_SpikeRule, _LossRule):
    """Fires when a step's loss spikes against the recent losses of its mode.

    A loss is a spike when it lies more than ``sigma`` deviations from the mean of the last
    ``window`` healthy losses, either side, or above ``ratio`` times that mean (``ratio`` > 0),
    once ``warmup_steps`` losses are in the window; a loss that is not finite always is. The
    training judges every step and acts (SkipStep, Rollback, StopTraining) before the update;
    after the training, the saved losses (``tensor_regex``, else the ``losses`` collection, else
    the tensors named like a loss) are judged the same way.
    """

    def __init__(
        self,
        base_trial: Trial,
        tensor_regex: Sequence[str] | str | None = None,
        window: int | str = 128,
        sigma: float | str = 6.0,
        warmup_steps: int | str = 20,
        ratio: float | str = 0.0,
        max_skips: int | str = 10,
        max_skips_window: int | str = 100,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        shared = (window, sigma, warmup_steps, ratio, max_skips, max_skips_window)
        super().__init__(base_trial, shared, other_trials, action_str, tensor_regex=tensor_regex)
        parameters = self.parameters
        self.tensor_regex = parameters.texts("tensor_regex")
        self._patterns = parameters.patterns("tensor_regex")
        self._windows: dict[tuple[str, ModeKeys], SpikeWindow] = {}
        self._seen: dict[tuple[str, ModeKeys], int] = {}

    def _selection(self) -> TensorSelection:
        if self._patterns:
            return TensorSelection(patterns=self._patterns)
        if "losses" in self.base_trial.collections():
            return TensorSelection(collections=("losses",))
        return loss_selection(self.base_trial)

    def judge_saved(self, step: int) -> bool:
        """Whether a saved loss at ``step`` spikes against the saved losses before it."""
        found_mode, mode_step = self.base_trial.mode_modestep(step)
        mode = found_mode or ModeKeys.GLOBAL
        selection = self._selection()
        losses = self.losses_at(step, selection)
        if not losses:
            raise self.insufficient(
                f"no scalar loss of {selection.describe()} was saved at {self.step_words(step)}"
            )
        fired, judged = False, False
        where = step_in_words(step, mode, mode_step)
        for name, loss in losses.items():
            key = (name, mode)
            window = self._windows.setdefault(key, SpikeWindow(self.settings))
            verdict = window.judge(loss)
            judged |= verdict.spike or verdict.mean is not None
            if np.isfinite(loss):
                self._seen[key] = self._seen.get(key, 0) + 1
            if verdict.spike:
                fired = True
                self.record(
                    message=f"{name}: {where}: {_against(loss, verdict, self.settings)}",
                    tensor=name,
                    step=step,
                    value=loss,
                )
        if fired or judged:
            return fired
        seen = min(self._seen.get((name, mode), 0) for name in losses)
        raise self.insufficient(
            f"the {mode.name} losses are warming up: {seen} saved by {where}, "
            f"warmup_steps {self.warmup_steps} needed before one is judged"
        )


class GradientNormSpike(_SpikeRule):
    """Fires when the norm of a step's gradients spikes against the recent norms, judged as
    LossSpike judges losses. Only the training can judge it (the norms are not saved): its
    hook judges every update and acts (SkipStep, Rollback, StopTraining) before it.
    """

    def __init__(
        self,
        base_trial: Trial,
        window: int | str = 128,
        sigma: float | str = 6.0,
        warmup_steps: int | str = 20,
        ratio: float | str = 0.0,
        max_skips: int | str = 10,
        max_skips_window: int | str = 100,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        shared = (window, sigma, warmup_steps, ratio, max_skips, max_skips_window)
        super().__init__(base_trial, shared, other_trials, action_str)

    def judge_saved(self, step: int) -> bool:
        """Never: the norms are judged inside the training only."""
        raise self.insufficient(
            "GradientNormSpike is judged inside the training (the norm of every update), and "
            "this training's hook did not judge it: trainprobe's hook does in a job with the "
            "rule (trainprobe run --rule GradientNormSpike, the estimator, CreateTrainingJob)"
        )


def _against(value: float, verdict: SpikeVerdict, settings: SpikeSettings) -> str:
    """Why a saved value is a spike, in words."""
    if not np.isfinite(value):
        return f"the loss is {number(value)}"
    mean, std, z = verdict.mean, verdict.std, verdict.z
    if mean is None or std is None or z is None:
        return f"the loss {number(value)} is a spike"
    text = (
        f"the loss {number(value)} against the window's mean {number(mean)}, deviation "
        f"{number(std)} (z {z:.1f}"
    )
    if abs(z) > settings.sigma:
        return f"{text}, beyond sigma {settings.sigma:g})"
    return f"{text}; above ratio {settings.ratio:g} times the mean)"
