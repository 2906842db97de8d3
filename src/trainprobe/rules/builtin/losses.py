"""Rules about the loss curve: LossNotDecreasing, Overfit, Overtraining.

They read scalar losses (one value per step): the tensors of the job's ``losses`` collection,
or of the names and collections given. Training losses are those of TRAIN steps (and of GLOBAL
steps, for a script that never sets a mode); validation losses are those of EVAL steps. XGBoost's
losses are all GLOBAL and named by evaluation set (``train-logloss``, ``validation-logloss``):
there the name says which is which (``evaluation_sets``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.evaluation_sets import MetricPair, metric_pairs, validation_names
from trainprobe.rules.builtin.selection import TensorSelection, loss_selection
from trainprobe.storage.modes import ModeKeys

__all__ = ["LossNotDecreasing", "Overfit", "Overtraining"]

_TRAINING = (ModeKeys.TRAIN, ModeKeys.GLOBAL)


class _LossRule(BuiltinRule):
    """Reads the scalar losses a rule looks at."""

    def losses_at(self, step: int, selection: TensorSelection) -> dict[str, float]:
        """The scalar value of each selected tensor saved (raw) at ``step``."""
        found = {}
        for name in selection.names(self.base_trial, step):
            value = self.value(name, step)
            if value is not None and value.size == 1:
                found[name] = float(np.asarray(value, dtype=np.float64).reshape(-1)[0])
        return found


WINDOW = 5
"""LossNotDecreasing compares means of at most this many saved losses, not single mini-batches."""


@dataclass
class _History:
    """One loss's finite values by position (the step number the rule counts in), oldest first."""

    positions: list[int] = field(default_factory=list)
    entries: list[tuple[int, float]] = field(default_factory=list)

    def add(self, position: int, step: int, loss: float) -> None:
        self.positions.append(position)
        self.entries.append((step, loss))

    def windows(self, gap: int) -> tuple[list[tuple[int, float]], list[tuple[int, float]]] | None:
        """(earlier, recent): the newest entries (at most ``WINDOW``, at most half of those
        saved) and the ``WINDOW`` entries before them, the newest of which is at least ``gap``
        positions before the newest entry; None while no entry is that far back."""
        newest = len(self.entries) - 1
        far_enough = bisect_right(self.positions, self.positions[-1] - gap) - 1
        if far_enough < 0:
            return None
        size = min(WINDOW, max(1, len(self.entries) // 2))
        last_earlier = min(far_enough, newest - size)
        earlier = self.entries[max(0, last_earlier - WINDOW + 1) : last_earlier + 1]
        return earlier, self.entries[newest - size + 1 :]


def _mean_of(window: list[tuple[int, float]]) -> tuple[float, str]:
    """A window's mean loss, and where it comes from in words."""
    mean = float(np.mean([loss for _, loss in window]))
    if len(window) == 1:
        return mean, f"{number(mean)} at step {window[0][0]}"
    steps = f"steps {window[0][0]}-{window[-1][0]}"
    return mean, f"{number(mean)} (mean of {len(window)} saved, {steps})"


class LossNotDecreasing(_LossRule):
    """Fires when a loss has not decreased enough over ``num_steps`` steps, or is not finite.

    Every ``num_steps`` steps (counted in ``mode``'s own step numbers; GLOBAL counts every
    step), the loss now is compared with the loss at least ``num_steps`` steps before. With
    GLOBAL, each mode's losses are a series of their own: a validation loss is compared with
    validation losses, never with a training batch's. If it
    went up, the rule fires when it rose by more than ``increase_threshold_percent`` percent;
    otherwise it fires when it fell by less than ``diff_percent`` percent (a flat loss fires).

    Each side of the comparison is smoothed, since one mini-batch's loss is noisy: "now" is
    the mean of the newest ``WINDOW`` saved losses (fewer while fewer than twice as many are
    saved), "before" the mean of the ``WINDOW`` saved losses that precede them, the newest of
    those at least ``num_steps`` steps back. The first check needs two saved losses
    ``num_steps`` apart, as SageMaker's; until one is made the rule has judged nothing, and a
    job that never gets that far ends in Error, not NoIssuesFound.

    A loss that is NaN or infinite is an issue at the step it was saved.

    The losses are the tensors of ``collection_names`` and ``tensor_regex``, plus the
    ``losses`` collection when ``use_losses_collection``; with none of these in the job, the
    tensors named like a loss. Only scalars count.
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
        self._history: dict[tuple[str, ModeKeys | None], _History] = {}
        self._last_evaluated: dict[tuple[str, ModeKeys | None], int] = {}

    def _selection(self) -> TensorSelection:
        collections = list(self.collection_names)
        if self.use_losses_collection and "losses" in self.base_trial.collections():
            collections.append("losses")
        if collections or self._patterns:
            return TensorSelection(collections=tuple(collections), patterns=self._patterns)
        return loss_selection(self.base_trial)

    def invoke_at_step(self, step: int) -> bool:
        """Whether a loss at ``step`` is not finite, or, due for a check, has not decreased
        enough."""
        step_mode, mode_step = self.base_trial.mode_modestep(step)
        if self.mode != ModeKeys.GLOBAL and step_mode != self.mode:
            raise self.insufficient(
                f"step {step} is not a {self.mode.name} step; the rule checks {self.mode.name} "
                "losses"
            )
        position = step if self.mode == ModeKeys.GLOBAL or mode_step is None else mode_step
        selection = self._selection()
        losses = self.losses_at(step, selection)
        if not losses:
            raise self.insufficient(
                f"no scalar loss of {selection.describe()} was saved at step {step}"
            )
        fired = False
        for name, loss in losses.items():
            if not np.isfinite(loss):
                fired = True
                self.record(
                    message=f"{name}: the loss is {number(loss)} at step {step}",
                    tensor=name,
                    step=step,
                    value=loss,
                )
                continue
            series = (name, step_mode)
            history = self._history.setdefault(series, _History())
            if history.positions and history.positions[-1] >= position:
                continue
            history.add(position, step, loss)
            last = self._last_evaluated.get(series)
            if last is not None and position < last + self.num_steps:
                continue
            windows = history.windows(self.num_steps)
            if windows is None:
                continue
            self._last_evaluated[series] = position
            self.has_judged = True
            fired |= self._compare(name, step_mode, *windows)
        if fired:
            return True
        first = min((history.positions[0] for history in self._history.values()), default=0)
        return self.nothing_due(
            f"waiting for losses num_steps {self.num_steps} steps apart: those saved up to "
            f"step {step} span {position - first} (run longer, or lower num_steps)"
        )

    def _compare(
        self,
        name: str,
        mode: ModeKeys | None,
        earlier: list[tuple[int, float]],
        recent: list[tuple[int, float]],
    ) -> bool:
        before, before_words = _mean_of(earlier)
        loss, loss_words = _mean_of(recent)
        if before == 0:
            return False
        change = 100.0 * (loss - before) / abs(before)
        kind = "validation loss" if mode == ModeKeys.EVAL else "loss"
        went = f"{name}: the {kind} went from {before_words} to {loss_words}"
        if change > 0:
            if change <= self.increase_threshold_percent:
                return False
            message = (
                f"{went}, up {number(change)}% > increase_threshold_percent "
                f"{number(self.increase_threshold_percent)}%"
            )
            threshold = self.increase_threshold_percent
        else:
            if -change >= self.diff_percent:
                return False
            message = (
                f"{went}, down {number(abs(change))}% < diff_percent {number(self.diff_percent)}%"
            )
            threshold = self.diff_percent
        step = recent[-1][0]
        self.record(message=message, tensor=name, step=step, value=loss, threshold=threshold)
        return True


class Overfit(_LossRule):
    """Fires when the validation loss pulls away from the training loss.

    At each EVAL step from ``start_step`` on, it compares the mean loss of the current
    validation phase (the EVAL steps since the last training step) with the mean loss of the
    latest training phase: when ``(mean_val - mean_train) / mean_train > ratio_threshold`` at
    ``patience`` evaluations in a row, it fires. XGBoost evaluates both sets at every round: each
    round compares a validation set's loss with the training set's loss of the same metric.
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
        self._phases: dict[str, _Phases] = {}

    def invoke_at_step(self, step: int) -> bool:
        """Whether the validation loss has been too far above the training loss for
        ``patience`` evaluations, as of ``step``."""
        mode = self.base_trial.mode(step)
        if mode not in (*_TRAINING, ModeKeys.EVAL):
            raise self.insufficient(f"step {step} is neither a training nor an EVAL step")
        selection = (
            TensorSelection(patterns=self._patterns)
            if self._patterns
            else loss_selection(self.base_trial)
        )
        losses = self.losses_at(step, selection)
        if not losses:
            raise self.insufficient(
                f"no scalar loss of {selection.describe()} was saved at step {step}"
            )
        pairs = metric_pairs(losses) if mode == ModeKeys.GLOBAL else []
        fired = (
            self._compare_sets(step, losses, pairs)
            if pairs
            else self._compare_phases(step, mode, losses)
        )
        return fired or self.nothing_due(
            f"no validation loss could be compared with a training loss yet, as of step {step}: "
            f"Overfit compares the losses of EVAL steps (from start_step {self.start_step}) "
            "with those of the TRAIN steps before them"
        )

    def _compare_phases(self, step: int, mode: ModeKeys, losses: dict[str, float]) -> bool:
        """Each loss of an EVAL step against the same loss's latest training phase."""
        fired = False
        for name, loss in losses.items():
            phases = self._phases.setdefault(name, _Phases())
            if mode != ModeKeys.EVAL:
                phases.add_training(loss)
                continue
            phases.add_validation(loss)
            if step < self.start_step or not phases.training:
                continue
            train = float(np.mean(phases.training))
            validation = float(np.mean(phases.validation))
            if train <= 0:
                continue
            difference = (
                f"(mean validation loss {number(validation)} - mean training loss "
                f"{number(train)}) / mean training loss"
            )
            fired |= self._judge(phases, name, step, train, validation, difference)
        return fired

    def _compare_sets(self, step: int, losses: dict[str, float], pairs: list[MetricPair]) -> bool:
        """Each validation set's loss against the training set's, at one XGBoost round."""
        fired = False
        for pair in pairs:
            phases = self._phases.setdefault(pair.validation, _Phases())
            train, validation = losses[pair.training], losses[pair.validation]
            if step < self.start_step or train <= 0:
                continue
            shown = number(train)
            difference = f"({number(validation)} - {pair.training} {shown}) / {shown}"
            fired |= self._judge(phases, pair.validation, step, train, validation, difference)
        return fired

    def _judge(
        self,
        phases: _Phases,
        tensor: str,
        step: int,
        train: float,
        validation: float,
        difference: str,
    ) -> bool:
        """Count one evaluation whose validation loss is ``ratio_threshold`` above the training
        loss; fire, with ``difference`` showing the sum, after ``patience`` in a row."""
        self.has_judged = True
        ratio = (validation - train) / train
        phases.strikes = phases.strikes + 1 if ratio > self.ratio_threshold else 0
        if phases.strikes < self.patience:
            return False
        self.record(
            message=(
                f"{tensor}: {difference} = {number(ratio)} > ratio_threshold "
                f"{number(self.ratio_threshold)} at step {step}, {phases.strikes} "
                f"evaluation(s) in a row (patience {self.patience})"
            ),
            tensor=tensor,
            step=step,
            value=ratio,
            threshold=self.ratio_threshold,
        )
        return True


@dataclass
class _Phases:
    """One loss's latest training phase and current validation phase."""

    training: list[float] = field(default_factory=list)
    validation: list[float] = field(default_factory=list)
    in_validation: bool = False
    strikes: int = 0

    def add_training(self, loss: float) -> None:
        if self.in_validation:
            self.training = []
            self.in_validation = False
        self.training.append(loss)

    def add_validation(self, loss: float) -> None:
        if not self.in_validation:
            self.validation = []
            self.in_validation = True
        self.validation.append(loss)


@dataclass
class _Optimum:
    """The best loss seen and how many saved steps ago it was reached."""

    best: float
    since: int = 0
    seen: int = 1
    """How many saved steps the loss has been seen at."""


class Overtraining(_LossRule):
    """Fires when the training loss or the validation loss has stopped improving.

    As early stopping does: a loss reaches a new optimum when it falls more than ``delta`` below
    the best so far. When the training loss has not for ``patience_train`` saved training
    steps, or the validation loss for ``patience_validation`` saved EVAL steps, the rule fires.
    The losses are the job's ``losses`` collection (or the tensors named like a loss).
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

    def invoke_at_step(self, step: int) -> bool:
        """Whether, as of ``step``, a loss has gone ``patience_*`` steps without a new optimum."""
        mode = self.base_trial.mode(step)
        if mode not in (*_TRAINING, ModeKeys.EVAL):
            raise self.insufficient(f"step {step} is neither a training nor an EVAL step")
        selection = loss_selection(self.base_trial)
        losses = self.losses_at(step, selection)
        if not losses:
            raise self.insufficient(
                f"no scalar loss of {selection.describe()} was saved at step {step}"
            )
        by_set = validation_names(losses) if mode == ModeKeys.GLOBAL else None
        fired = False
        for name, loss in losses.items():
            validation = name in by_set if by_set is not None else mode == ModeKeys.EVAL
            patience = self.patience_validation if validation else self.patience_train
            kind = "validation" if validation else "training"
            parameter = "patience_validation" if validation else "patience_train"
            optimum = self._optima.get((name, validation))
            seen = 1 if optimum is None else optimum.seen + 1
            self.has_judged |= seen > patience
            if optimum is None or loss < optimum.best - self.delta:
                self._optima[name, validation] = _Optimum(loss, seen=seen)
                continue
            optimum.seen = seen
            optimum.since += 1
            if optimum.since >= patience:
                fired = True
                self.record(
                    message=(
                        f"{name}: the {kind} loss has not improved by more than delta "
                        f"{number(self.delta)} on its best {number(optimum.best)} for "
                        f"{optimum.since} saved steps ({parameter} {patience}) at step {step}"
                    ),
                    tensor=name,
                    step=step,
                    value=optimum.since,
                    threshold=patience,
                )
        return fired or self.nothing_due(
            f"no loss was saved at more than patience_train {self.patience_train} training "
            f"steps or patience_validation {self.patience_validation} EVAL steps yet, as of "
            f"step {step}: Overtraining gives a loss that many steps to improve"
        )
