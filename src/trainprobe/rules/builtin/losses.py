"""Rules about the loss curve: LossNotDecreasing, Overfit, Overtraining.

They read scalar losses (one value per step): the tensors of the job's ``losses`` collection,
or of the names and collections given. They judge training progress, so a loss is judged
against losses of the same kind: a training loss (of a TRAIN step, or a GLOBAL step for a script
that never sets a mode) against training losses, an evaluation pass (the EVAL steps between two
training steps, ``loss_series``) as one value, its mean, against evaluation passes or against
the training; never one batch of a pass against another. Each side of a comparison is smoothed
over at least ``WINDOW`` saved losses, and a rule judges nothing before it holds them.

XGBoost's losses are all GLOBAL and named by evaluation set (``train-logloss``,
``validation-logloss``): there the name says which is which (``evaluation_sets``), and each
round's value, computed over a whole data set, is judged as it is.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.evaluation_sets import MetricPair, metric_pairs, validation_names
from trainprobe.rules.builtin.loss_series import (
    PASS_MODES,
    WINDOW,
    EvaluationPasses,
    LossSeries,
    LossValue,
    mean_of,
    newest_window,
    noise_of,
    window_words,
)
from trainprobe.rules.builtin.selection import TensorSelection, loss_selection
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.training_record import LOSS as RECORDED_LOSS

__all__ = ["LossNotDecreasing", "Overfit", "Overtraining"]

_NOT_FINITE = "losses that were NaN or infinite (LossNotDecreasing fires on those)"
_RISE_WITHIN_NOISE = (
    "rises above increase_threshold_percent only within the batches' noise (two standard "
    "errors of the difference of the means; not counted)"
)
_NAMES_SAID = 3
_PASS_COMPLETES = "an evaluation pass is judged once complete, when the training resumes or ends"


class _LossRule(BuiltinRule):
    """Reads the scalar losses a rule looks at, and gathers EVAL steps into passes."""

    def __init__(
        self,
        base_trial: Trial,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        self._passes = EvaluationPasses()
        self._comparisons = 0
        """How many comparisons the rule has made (a step that made one was judged)."""

    def losses_at(self, step: int, selection: TensorSelection) -> dict[str, float]:
        """The scalar value of each selected tensor saved (raw) at ``step``."""
        found = {}
        for name in selection.names(self.base_trial, step):
            value = self.value(name, step)
            if value is not None and value.size == 1:
                found[name] = float(np.asarray(value, dtype=np.float64).reshape(-1)[0])
        return found

    def where(self, step: int) -> tuple[ModeKeys, int]:
        """``step``'s mode (GLOBAL when not known) and its step in that mode."""
        mode, mode_step = self.base_trial.mode_modestep(step)
        return mode or ModeKeys.GLOBAL, step if mode_step is None else mode_step

    def judge_pass(self, name: str, value: LossValue) -> bool:
        """Judge a complete evaluation pass of loss ``name``; whether the condition is met."""
        return False

    def complete_passes(self, step: int, mode: ModeKeys, mode_step: int) -> bool:
        """Judge the passes that ``step`` shows complete."""
        fired = False
        for name, value in self._passes.complete_before(step, mode, mode_step):
            fired |= self.judge_pass(name, value)
        return fired

    def judge_at_end(self) -> bool | None:
        """The training has ended: judge the evaluation passes its end completes. Whether the
        condition is met; None when that made no comparison (the rule's runner then records
        nothing). A rule that has judged nothing says again what it waits for, now that the
        last pass is counted (InsufficientInformation)."""
        compared, fired, completed = self._comparisons, False, False
        for name, value in self._passes.complete_all():
            completed = True
            fired |= self.judge_pass(name, value)
        if fired or self._comparisons > compared:
            return fired
        if completed and not self.has_judged:
            raise self.insufficient(self.waiting())
        return None

    def waiting(self) -> str:
        """What the rule waits for before its first judgement, in words."""
        return "waiting for losses to judge"

    def no_loss(self, step: int, selection: TensorSelection, compared_before: int) -> bool:
        """For a step that saved none of the losses: what it judged (passes it completed),
        else InsufficientInformation saying so."""
        if self._comparisons > compared_before:
            return False
        raise self.insufficient(
            f"no scalar loss of {selection.describe()} was saved at {self.step_words(step)}"
        )


def _listed(parts: list[str]) -> str:
    shown = "; ".join(parts[:_NAMES_SAID])
    if len(parts) > _NAMES_SAID:
        shown += f"; and {len(parts) - _NAMES_SAID} more"
    return shown


class LossNotDecreasing(_LossRule):
    """Fires when a loss has not decreased enough over ``num_steps`` steps, or is not finite.

    The training loss and the evaluation passes are judged apart, each against its own kind
    (``mode`` TRAIN or EVAL judges only that one; GLOBAL both). Every ``num_steps`` steps
    (counted in the mode's own steps: TRAIN steps for the training loss, EVAL steps for the
    passes), the loss now is compared with the loss at least ``num_steps`` steps before. If it
    went up, the rule fires when it rose by more than ``increase_threshold_percent`` percent;
    otherwise it fires when it fell by less than ``diff_percent`` percent (a flat loss fires).

    Each side of the comparison is smoothed, since one mini-batch's loss is noisy: "now" is the
    mean of the newest values holding ``WINDOW`` saved losses (the newest 5 training losses; the
    newest evaluation passes, each one value, its mean, holding 5 losses together), "before" the
    mean of as many before them, the newest of those at least ``num_steps`` steps back. Until
    the rule holds that much it judges nothing and says what it waits for; a job that never
    gets that far ends in Error, not NoIssuesFound.

    A loss that is NaN or infinite is an issue at the step it was saved.

    The losses are the tensors of ``collection_names`` and ``tensor_regex``, plus the
    ``losses`` collection when ``use_losses_collection``; with none of these in the job, the
    tensors named like a loss. Only scalars count.

    With SageMaker's default save interval (500 steps) a short job saves one or two training
    losses. Where trainprobe's hook kept its training record (``trainprobe/loss``: the training's
    own loss at every TRAIN step, whatever the save interval) and the rule reads the job's losses
    as by default (the ``losses`` collection, no ``collection_names`` or ``tensor_regex``), the
    training loss is judged from the record as soon as it holds more of the training's losses
    than were saved and no saved training loss has been compared yet; the verdict says so. A
    recorded step whose loss the hook did not find (NaN) is passed over: a non-finite loss is
    caught where it was saved, and by the hook's non-finite guard.
    """

    def __init__(
        self,
        base_trial: Trial,
        collection_names: Sequence[str] | str | None = None,
        tensor_regex: Sequence[str] | str | None = None,
        use_losses_collection: bool | str = True,
        num_steps: int | str = 10,
        diff_percent: float | str = 0.1,
        increase_threshold_percent: float | str = 5,
        mode: str = "GLOBAL",
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "LossNotDecreasing",
            {
                "collection_names": collection_names,
                "tensor_regex": tensor_regex,
                "use_losses_collection": use_losses_collection,
                "num_steps": num_steps,
                "diff_percent": diff_percent,
                "increase_threshold_percent": increase_threshold_percent,
                "mode": mode.upper() if isinstance(mode, str) else mode,
            },
        )
        self.collection_names = parameters.texts("collection_names")
        self.tensor_regex = parameters.texts("tensor_regex")
        self.use_losses_collection = parameters.flag("use_losses_collection")
        self.num_steps = parameters.integer("num_steps")
        self.diff_percent = parameters.real("diff_percent")
        self.increase_threshold_percent = parameters.real("increase_threshold_percent")
        self.mode = ModeKeys[parameters.text("mode")]
        self._patterns = parameters.patterns("tensor_regex")
        self._series: dict[tuple[str, ModeKeys], LossSeries] = {}
        self._record: tuple[int, int] | None = None
        """Judging the training record instead of the saved training losses: (how many of them
        had been saved then, the last global step of the record fed so far)."""

    def _selection(self) -> TensorSelection:
        collections = list(self.collection_names)
        if self.use_losses_collection and "losses" in self.base_trial.collections():
            collections.append("losses")
        if collections or self._patterns:
            return TensorSelection(collections=tuple(collections), patterns=self._patterns)
        return loss_selection(self.base_trial)

    def _wanted(self, mode: ModeKeys) -> bool:
        return self.mode == ModeKeys.GLOBAL or mode == self.mode

    def invoke_at_step(self, step: int) -> bool:
        """Whether a loss at ``step`` is not finite, or, due for a check (a training loss, or an
        evaluation pass ``step`` completes), has not decreased enough."""
        mode, mode_step = self.where(step)
        compared = self._comparisons
        fired = self.complete_passes(step, mode, mode_step)
        if not self._wanted(mode):
            if fired or self._comparisons > compared:
                return fired
            raise self.insufficient(
                f"{self.step_words(step)} is not a {self.mode.name} step; the rule checks "
                f"{self.mode.name} losses"
            )
        selection = self._selection()
        losses = self.losses_at(step, selection)
        if mode not in PASS_MODES and self._judges_record(step, saved_now=bool(losses)):
            fired |= self._judge_record(step)
            # The saved losses are in the record: only a non-finite one is still news.
            losses = {name: loss for name, loss in losses.items() if not np.isfinite(loss)}
            if not losses:
                if fired or self._comparisons > compared:
                    return fired
                return self.nothing_due(self.waiting())
        if not losses:
            return fired or self.no_loss(step, selection, compared)
        # XGBoost's metrics are each over a whole data set: judged as they are, unsmoothed.
        exact = mode == ModeKeys.GLOBAL and validation_names(losses) is not None
        for name, loss in losses.items():
            if not np.isfinite(loss):
                fired = True
                self.record(
                    message=f"{name}: the loss is {number(loss)} at {self.step_words(step)}",
                    tensor=name,
                    step=step,
                    value=loss,
                )
            elif mode in PASS_MODES:
                self._passes.add(name, mode, step, mode_step, loss)
            else:
                value = LossValue.at_step(loss, mode, step, mode_step)
                fired |= self._judge(name, value, least=1 if exact else WINDOW)
        if fired or self._comparisons > compared:
            return fired
        return self.nothing_due(self.waiting())

    def judge_pass(self, name: str, value: LossValue) -> bool:
        return self._wanted(value.mode) and self._judge(name, value)

    def judge_at_end(self) -> bool | None:
        """The training has ended: the rest of the training record too, where it is judged."""
        before = self._comparisons
        fired = self._judges_record(None) and self._judge_record(None)
        ended = super().judge_at_end()
        if fired or ended:
            return True
        return False if self._comparisons > before else ended

    # ----- the training record -----

    def _judges_record(self, step: int | None, saved_now: bool = False) -> bool:
        """Whether the training losses are judged from the training record (from now on, once
        it is so): the rule reads the losses as by default, no saved training loss has been
        compared, and the record holds more of the training's losses up to ``step`` (None: all)
        than were saved (those judged so far, and ``step``'s own when ``saved_now``)."""
        if self._record is not None:
            return True
        if self.collection_names or self.tensor_regex or not self.use_losses_collection:
            return False
        training = [series for (_, mode), series in self._series.items() if mode not in PASS_MODES]
        if any(series.last_compared is not None for series in training):
            return False
        if not self.base_trial.has_tensor(RECORDED_LOSS):
            return False
        recorded = self.base_trial.tensor(RECORDED_LOSS).steps()
        held = max((series.held for series in training), default=0) + int(saved_now)
        if bisect_right(recorded, step if step is not None else recorded[-1]) <= held:
            return False
        self._record = (held, -1)
        for key in [key for key in self._series if key[1] not in PASS_MODES]:
            del self._series[key]  # their losses are in the record
        return True

    def _judge_record(self, through: int | None) -> bool:
        """Judge the record's losses after those fed so far, up to global step ``through``
        (None: all); whether the condition is met (at the first comparison that meets it)."""
        assert self._record is not None
        held, fed = self._record
        tensor = self.base_trial.tensor(RECORDED_LOSS)
        steps = tensor.steps()
        train = tensor.steps(mode=ModeKeys.TRAIN)
        mode = ModeKeys.TRAIN if train else ModeKeys.GLOBAL
        mode_steps = train or steps
        values = tensor.values()
        start = bisect_right(steps, fed)
        end = len(steps) if through is None else bisect_right(steps, through)
        for index in range(start, end):
            step = steps[index]
            self._record = (held, step)
            loss = float(values[step])
            if not self._wanted(mode) or not np.isfinite(loss):
                continue
            if self._judge(RECORDED_LOSS, LossValue.at_step(loss, mode, step, mode_steps[index])):
                return True
        return False

    def _judge(self, name: str, value: LossValue, least: int = WINDOW) -> bool:
        """Add ``value`` to its series and, when due, compare the series' windows (each of
        ``least`` saved losses or more)."""
        series = self._series.setdefault((name, value.mode), LossSeries(value.mode, least))
        if not series.add(value):
            return False
        last = series.last_compared
        if last is not None and value.position < last + self.num_steps:
            return False
        windows = series.windows(self.num_steps)
        if windows.earlier is None or windows.recent is None:
            return False
        series.last_compared = value.position
        series.forget_before(windows.earlier[0])
        self.has_judged = True
        self._comparisons += 1
        return self._compare(name, value.mode, windows.earlier, windows.recent)

    def waiting(self) -> str:
        """What the rule waits for before its first comparison, series by series."""
        parts = [
            f"{name}: {series.windows(self.num_steps).waiting}"
            for (name, _), series in sorted(self._series.items())
            if series.last_compared is None
        ]
        if self._passes.open_passes():
            parts.append(_PASS_COMPLETES)
        return "waiting for losses to compare: " + (_listed(parts) or "none saved yet")

    def remarks(self) -> list[str]:
        """Besides what was set aside: that the training losses came from the training record,
        and a series never compared while others were."""
        said = super().remarks()
        if self._record is not None:
            said.append(
                f"The training losses judged are {RECORDED_LOSS}, the training's own loss at "
                "every TRAIN step as trainprobe's hook recorded it, whatever the save interval: "
                f"the losses collection held {self._record[0]} training loss(es) then, too few "
                "to compare."
            )
        if not self.has_judged:
            return said
        for (name, mode), series in sorted(self._series.items()):
            if series.last_compared is None and self._wanted(mode):
                waiting = series.windows(self.num_steps).waiting
                kind = "evaluation passes" if mode in PASS_MODES else "losses"
                said.append(f"The {kind} of {name} were never compared: {waiting}.")
        return said

    def _compare(
        self,
        name: str,
        mode: ModeKeys,
        earlier: list[LossValue],
        recent: list[LossValue],
    ) -> bool:
        before, loss = mean_of(earlier), mean_of(recent)
        if before == 0:
            return False
        change = 100.0 * (loss - before) / abs(before)
        kind = "validation loss" if mode in PASS_MODES else "loss"
        kept = "recorded" if name == RECORDED_LOSS else "saved"
        went = (
            f"{name}: the {kind} went from {window_words(earlier, kept)} to "
            f"{window_words(recent, kept)}"
        )
        if change > 0:
            if change <= self.increase_threshold_percent:
                return False
            noise = 100.0 * noise_of(earlier, recent) / abs(before)
            if change - noise <= self.increase_threshold_percent:
                self.set_aside(_RISE_WITHIN_NOISE, name, recent[-1].last_step)
                return False
            message = (
                f"{went}, up {number(change)}% > increase_threshold_percent "
                f"{number(self.increase_threshold_percent)}% beyond the batches' noise (+/- "
                f"{number(noise)}%)"
            )
            threshold = self.increase_threshold_percent
        else:
            if -change >= self.diff_percent:
                return False
            message = (
                f"{went}, down {number(abs(change))}% < diff_percent {number(self.diff_percent)}%"
            )
            threshold = self.diff_percent
        step = recent[-1].last_step
        self.record(message=message, tensor=name, step=step, value=loss, threshold=threshold)
        return True


_WITHIN_NOISE = (
    "evaluation passes whose validation loss was above ratio_threshold only within the "
    "batches' noise (two standard errors of the difference; not counted)"
)


class Overfit(_LossRule):
    """Fires when the validation loss pulls away from the training loss.

    Each complete evaluation pass from ``start_step`` on is one evaluation: the mean validation
    loss of the newest passes (those holding at least ``WINDOW`` saved losses: the pass alone
    when it has 5 batches or more) against the mean training loss of the same stretch of the
    training (the training losses since the pass before them, at least the newest ``WINDOW``).
    It counts when ``(mean_val - mean_train) / mean_train > ratio_threshold`` beyond the noise
    of the batches: the difference, less two standard errors, still exceeds ratio_threshold of
    the training loss. Near a loss of 0 a few hard samples move a batch's loss by tens of
    percent, and a healthy training whose validation loss falls with its training loss is not
    overfitting. After ``patience`` evaluations in a row, it fires.

    XGBoost evaluates both sets at every round, each over a whole data set: each round compares
    a validation set's loss with the training set's loss of the same metric.
    """

    modes = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL)

    def __init__(
        self,
        base_trial: Trial,
        tensor_regex: Sequence[str] | str | None = None,
        start_step: int | str = 0,
        patience: int | str = 1,
        ratio_threshold: float | str = 0.1,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "Overfit",
            {
                "tensor_regex": tensor_regex,
                "start_step": start_step,
                "patience": patience,
                "ratio_threshold": ratio_threshold,
            },
        )
        self.tensor_regex = parameters.texts("tensor_regex")
        self.start_step = parameters.integer("start_step")
        self.patience = parameters.integer("patience")
        self.ratio_threshold = parameters.real("ratio_threshold")
        self._patterns = parameters.patterns("tensor_regex")
        self._training: dict[str, list[LossValue]] = {}
        self._evaluations: dict[str, list[LossValue]] = {}
        self._strikes: dict[str, int] = {}

    def invoke_at_step(self, step: int) -> bool:
        """Whether the validation loss has been too far above the training loss for
        ``patience`` evaluations, as of ``step``."""
        mode, mode_step = self.where(step)
        compared = self._comparisons
        fired = self.complete_passes(step, mode, mode_step)
        selection = (
            TensorSelection(patterns=self._patterns)
            if self._patterns
            else loss_selection(self.base_trial)
        )
        losses = self.losses_at(step, selection)
        if not losses:
            return fired or self.no_loss(step, selection, compared)
        pairs = metric_pairs(losses) if mode == ModeKeys.GLOBAL else []
        if pairs:
            fired |= self._compare_sets(step, losses, pairs)
        for name, loss in losses.items():
            if pairs:
                break
            if not math.isfinite(loss):
                self.set_aside(_NOT_FINITE, name, step)
            elif mode == ModeKeys.EVAL:
                self._passes.add(name, mode, step, mode_step, loss)
            else:
                training = self._training.setdefault(name, [])
                training.append(LossValue.at_step(loss, mode, step, mode_step))
        if fired or self._comparisons > compared:
            return fired
        return self.nothing_due(self.waiting())

    def judge_pass(self, name: str, value: LossValue) -> bool:
        """One evaluation: the newest passes against the training losses of the same stretch."""
        evaluations = self._evaluations.setdefault(name, [])
        evaluations.append(value)
        if value.first_step < self.start_step:
            return False
        validation = newest_window(evaluations)
        training = self._training.get(name, [])
        if validation is None or not training:
            return False
        # The training losses saved before the newest pass, since the pass before the window.
        end = bisect_left([item.last_step for item in training], value.first_step)
        earlier = len(evaluations) - len(validation) - 1
        since = evaluations[earlier].last_step if earlier >= 0 else -1
        start = bisect_left([item.last_step for item in training], since)
        start = max(0, min(start, end - WINDOW))
        if end - start < WINDOW:
            return False
        window = training[start:end]
        # Later evaluations look at later stretches only.
        del training[:start]
        del evaluations[: max(0, earlier)]
        self.has_judged = True
        self._comparisons += 1
        return self._judge(name, value, validation, window)

    def _judge(
        self, name: str, value: LossValue, validation: list[LossValue], window: list[LossValue]
    ) -> bool:
        train, val = mean_of(window), mean_of(validation)
        if train <= 0:
            return False
        noise = noise_of(window, validation)
        ratio = (val - train) / train
        beyond = val - noise - train > self.ratio_threshold * train
        if ratio > self.ratio_threshold and not beyond:
            self.set_aside(_WITHIN_NOISE, name, value.last_step)
        strikes = self._strikes[name] = self._strikes.get(name, 0) + 1 if beyond else 0
        if strikes < self.patience:
            return False
        self.record(
            message=(
                f"{name}: (mean validation loss {number(val)} - mean training loss "
                f"{number(train)}) / mean training loss = {number(ratio)} > ratio_threshold "
                f"{number(self.ratio_threshold)} beyond the batches' noise (+/- "
                f"{number(noise / train)}) at the evaluation pass of {value.words()}, "
                f"{strikes} evaluation(s) in a row (patience {self.patience}); validation "
                f"{window_words(validation)}, training {window_words(window)}"
            ),
            tensor=name,
            step=value.last_step,
            value=ratio,
            threshold=self.ratio_threshold,
        )
        return True

    def _compare_sets(self, step: int, losses: dict[str, float], pairs: list[MetricPair]) -> bool:
        """Each validation set's loss against the training set's, at one XGBoost round."""
        fired = False
        for pair in pairs:
            train, validation = losses[pair.training], losses[pair.validation]
            if step < self.start_step or train <= 0:
                continue
            self.has_judged = True
            self._comparisons += 1
            ratio = (validation - train) / train
            strikes = self._strikes.get(pair.validation, 0) + 1
            self._strikes[pair.validation] = strikes if ratio > self.ratio_threshold else 0
            if ratio <= self.ratio_threshold or strikes < self.patience:
                continue
            fired = True
            shown = number(train)
            self.record(
                message=(
                    f"{pair.validation}: ({number(validation)} - {pair.training} {shown}) / "
                    f"{shown} = {number(ratio)} > ratio_threshold "
                    f"{number(self.ratio_threshold)} at {self.step_words(step)}, {strikes} "
                    f"evaluation(s) in a row (patience {self.patience})"
                ),
                tensor=pair.validation,
                step=step,
                value=ratio,
                threshold=self.ratio_threshold,
            )
        return fired

    def waiting(self) -> str:
        parts = []
        for name in sorted(set(self._training) | set(self._evaluations)):
            passes = self._evaluations.get(name, [])
            held = sum(len(item.losses) for item in passes)
            parts.append(
                f"{name}: {len(passes)} complete evaluation pass(es) holding {held} EVAL "
                f"loss(es), {len(self._training.get(name, []))} training loss(es)"
            )
        if self._passes.open_passes():
            parts.append(_PASS_COMPLETES)
        if not self._evaluations and not self._passes.open_passes():
            parts.append(
                "no EVAL loss saved yet: save evaluation steps (the hook's set_mode(modes.EVAL), "
                "or the model's eval() under torch.no_grad())"
            )
        start = f" from start_step {self.start_step}" if self.start_step else ""
        return (
            f"Overfit compares each complete evaluation pass{start} (with the newest passes, "
            f"holding {WINDOW} EVAL losses or more) with the training losses before it "
            f"({WINDOW} or more): {_listed(parts)}; run longer, or save the losses more often"
        )


@dataclass
class _Optimum:
    """The best smoothed loss seen, and how many smoothed values ago it was reached."""

    best: float
    since: int = 0
    seen: int = 1
    """How many smoothed values of the loss have been seen."""


class Overtraining(_LossRule):
    """Fires when the training loss or the validation loss has stopped improving.

    As early stopping does: a loss reaches a new optimum when it falls more than ``delta`` below
    the best so far. When the training loss has not for ``patience_train`` saved training
    steps, or the validation loss for ``patience_validation`` evaluation passes, the rule fires.
    The loss followed is smoothed, as LossNotDecreasing's: the mean of the newest 5 training
    losses, and of the newest evaluation passes holding 5 EVAL losses (each pass one value, its
    mean: batches of one pass share their weights, so they are not steps of progress). The
    losses are the job's ``losses`` collection (or the tensors named like a loss).
    """

    modes = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL)

    def __init__(
        self,
        base_trial: Trial,
        patience_train: int | str = 5,
        patience_validation: int | str = 10,
        delta: float | str = 0.01,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "Overtraining",
            {
                "patience_train": patience_train,
                "patience_validation": patience_validation,
                "delta": delta,
            },
        )
        self.patience_train = parameters.integer("patience_train")
        self.patience_validation = parameters.integer("patience_validation")
        self.delta = parameters.real("delta")
        self._optima: dict[tuple[str, bool], _Optimum] = {}
        self._recent: dict[tuple[str, bool], list[LossValue]] = {}
        self._observed: dict[tuple[str, bool], int] = {}

    def invoke_at_step(self, step: int) -> bool:
        """Whether, as of ``step``, a loss has gone ``patience_*`` values without a new
        optimum."""
        mode, mode_step = self.where(step)
        compared = self._comparisons
        fired = self.complete_passes(step, mode, mode_step)
        selection = loss_selection(self.base_trial)
        losses = self.losses_at(step, selection)
        if not losses:
            return fired or self.no_loss(step, selection, compared)
        by_set = validation_names(losses) if mode == ModeKeys.GLOBAL else None
        for name, loss in losses.items():
            value = LossValue.at_step(loss, mode, step, mode_step)
            if not math.isfinite(loss):
                self.set_aside(_NOT_FINITE, name, step)
            elif by_set is not None:
                # XGBoost: a round's metric is over a whole data set, judged as it is.
                fired |= self._observe(name, name in by_set, value, least=1)
            elif mode == ModeKeys.EVAL:
                self._passes.add(name, mode, step, mode_step, loss)
            else:
                fired |= self._observe(name, False, value)
        if fired or self._comparisons > compared:
            return fired
        return self.nothing_due(self.waiting())

    def judge_pass(self, name: str, value: LossValue) -> bool:
        return self._observe(name, True, value)

    def _observe(self, name: str, validation: bool, value: LossValue, least: int = WINDOW) -> bool:
        """Follow the smoothed loss with ``value``; whether it has gone patience values
        without a new optimum."""
        key = (name, validation)
        self._observed[key] = self._observed.get(key, 0) + 1
        recent = self._recent.setdefault(key, [])
        recent.append(value)
        window = newest_window(recent, least=least)
        if window is None:
            return False
        del recent[: len(recent) - len(window)]
        smoothed = mean_of(window)
        patience = self.patience_validation if validation else self.patience_train
        optimum = self._optima.get(key)
        seen = 1 if optimum is None else optimum.seen + 1
        if seen > patience:
            self.has_judged = True
            self._comparisons += 1
        if optimum is None or smoothed < optimum.best - self.delta:
            self._optima[key] = _Optimum(smoothed, seen=seen)
            return False
        optimum.seen = seen
        optimum.since += 1
        if optimum.since < patience:
            return False
        kind = "validation" if validation else "training"
        parameter = "patience_validation" if validation else "patience_train"
        unit = "evaluation passes" if value.mode in PASS_MODES else "saved steps"
        self.record(
            message=(
                f"{name}: the {kind} loss has not improved by more than delta "
                f"{number(self.delta)} on its best {number(optimum.best)} for {optimum.since} "
                f"{unit} ({parameter} {patience}), as of {value.words()}: now "
                f"{window_words(window)}"
            ),
            tensor=name,
            step=value.last_step,
            value=optimum.since,
            threshold=patience,
        )
        return True

    def waiting(self) -> str:
        parts = []
        for (name, validation), observed in sorted(self._observed.items()):
            if validation:
                parts.append(
                    f"{name}: {observed} evaluation pass(es) complete; the validation loss is "
                    f"followed from the first passes holding {WINDOW} EVAL losses, and judged "
                    f"after patience_validation {self.patience_validation} more passes"
                )
            else:
                parts.append(
                    f"{name}: {observed} training loss(es) saved, "
                    f"{WINDOW + self.patience_train} needed (the mean of {WINDOW}, then "
                    f"patience_train {self.patience_train} more)"
                )
        if self._passes.open_passes():
            parts.append(_PASS_COMPLETES)
        return (
            f"waiting for a loss followed long enough to judge: {_listed(parts)}; run longer, "
            "or lower patience_train or patience_validation"
        )
