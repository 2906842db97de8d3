"""Rules about a run as a whole: SimilarAcrossRuns and StalledTrainingRule.

SimilarAcrossRuns compares this job's tensors with another trial's, step by step.
StalledTrainingRule is a watchdog: it fires when no new step has been written for
``threshold`` seconds. A runner that waits for new steps should call its ``check_progress()``
while it waits: a stalled job writes no step, so ``invoke_at_step`` alone would only notice
the stall once the job moves again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np

from trainprobe.analysis.trial import Trial, create_trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.selection import TensorSelection
from trainprobe.storage import locations
from trainprobe.storage.training_end import training_has_ended

__all__ = ["SimilarAcrossRuns", "StalledTrainingRule"]


class SimilarAcrossRuns(BuiltinRule):
    """Fires when a tensor differs between this job and another trial at the same step.

    The other trial is the first of ``other_trials`` (as the engine passes it), else the output
    at ``other_trial`` (a local path). Tensors are the union of ``collection_names`` and
    ``tensor_regex`` (every tensor when neither is given); they differ when their shapes differ
    or ``numpy.allclose`` (rtol 1e-05, atol 1e-08, NaN equal to NaN) says they do.
    """

    def __init__(
        self,
        base_trial: Trial,
        other_trial: str | None = None,
        collection_names: Sequence[str] | str | None = None,
        tensor_regex: Sequence[str] | str | None = None,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        if other_trial is None and self.other_trials:
            other_trial = self.other_trials[0].path
        parameters = Parameters(
            "SimilarAcrossRuns",
            {
                "other_trial": other_trial,
                "collection_names": collection_names,
                "tensor_regex": tensor_regex,
            },
        )
        self.other_trial = parameters.text("other_trial")
        self.collection_names = parameters.texts("collection_names")
        self.tensor_regex = parameters.texts("tensor_regex")
        self.selection = TensorSelection(
            collections=self.collection_names,
            patterns=parameters.patterns("tensor_regex"),
            everything=True,
        )
        self._other: Trial | None = self.other_trials[0] if self.other_trials else None

    @property
    def other(self) -> Trial:
        """The trial compared with (opened on first use when given as a path)."""
        if self._other is None:
            self._other = create_trial(self.other_trial)
            self.other_trials.append(self._other)
            self.trials.append(self._other)
        return self._other

    def invoke_at_step(self, step: int) -> bool:
        """Whether a selected tensor at ``step`` differs from the other trial's."""
        other = self.other
        fired = False
        compared = 0
        for name in self.selection.names(self.base_trial, step):
            mine = self.value(name, step)
            if mine is None or not other.has_tensor(name):
                continue
            theirs = self.value(name, step, trial=other)
            if theirs is None:
                continue
            compared += 1
            if mine.shape == theirs.shape and np.allclose(mine, theirs, equal_nan=True):
                continue
            fired = True
            if mine.shape != theirs.shape:
                detail = f"shape {mine.shape} here, {theirs.shape} in {other.name}"
                difference: float | None = None
            else:
                difference = float(np.max(np.abs(mine.astype(np.float64) - theirs)))
                detail = f"largest difference {number(difference)}"
            self.record(
                message=(
                    f"{name} differs from {other.name}'s at step {step} ({detail}; "
                    "numpy.allclose with rtol=1e-05, atol=1e-08)"
                ),
                tensor=name,
                step=step,
                value=difference,
            )
        if not compared:
            raise self.insufficient(
                f"no tensor of {self.selection.describe()} was saved (raw) at step {step} in "
                f"both {self.base_trial.name} and {other.name}"
            )
        return fired


class StalledTrainingRule(BuiltinRule):
    """Fires when no new step has been written for ``threshold`` seconds.

    ``invoke_at_step`` compares when each step was written with when the previous one was, so
    a finished job shows where it stalled; ``check_progress`` compares the latest step with the
    clock, for a job that is stalled now. ``stop_training_on_fire`` and
    ``training_job_name_prefix`` say whether (and which job) to stop when it fires; the runner
    acts on them, as on a StopTraining action.
    """

    reads_tensors = False  # it judges when steps were written, not what they hold

    def __init__(
        self,
        base_trial: Trial,
        threshold: int | str = 1800,
        stop_training_on_fire: bool | str = False,
        training_job_name_prefix: str | None = None,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "StalledTrainingRule",
            {
                "threshold": threshold,
                "stop_training_on_fire": stop_training_on_fire,
                "training_job_name_prefix": training_job_name_prefix,
            },
        )
        self.threshold = parameters.integer("threshold")
        self.stop_training_on_fire = parameters.flag("stop_training_on_fire")
        self.training_job_name_prefix = parameters.optional_text("training_job_name_prefix")
        self.started = time.time()
        self._previous: tuple[int, float] | None = None

    def written_at(self, step: int) -> float | None:
        """When ``step`` was written (its latest index file), or None when that is not known."""
        times = []
        for worker in self.base_trial.workers():
            path = locations.join(self.base_trial.path, locations.index_file(step, worker))
            try:
                times.append(os.path.getmtime(path))
            except OSError:
                continue
        return max(times) if times else None

    def invoke_at_step(self, step: int) -> bool:
        """Whether more than ``threshold`` seconds passed between the previous step and
        ``step`` being written."""
        written = self.written_at(step)
        if written is None:
            raise self.insufficient(f"cannot tell when step {step} was written")
        previous = self._previous
        self._previous = (step, written)
        if previous is None:
            return False
        gap = written - previous[1]
        if gap <= self.threshold:
            return False
        self.record(
            message=(
                f"no step was written for {number(gap)} s, between step {previous[0]} and step "
                f"{step} (threshold {self.threshold} s)"
            ),
            step=step,
            value=gap,
            threshold=self.threshold,
        )
        return True

    def check_progress(self, now: float | None = None) -> bool:
        """Whether the job, still running, has written no step for more than ``threshold``
        seconds (counted from the rule's start when it has written none)."""
        if training_has_ended(self.base_trial.path):
            return False
        now = time.time() if now is None else now
        steps = self.base_trial.steps(show_incomplete_steps=True)
        last_step = steps[-1] if steps else None
        written = self.written_at(last_step) if last_step is not None else None
        idle = now - (written if written is not None else self.started)
        if idle <= self.threshold:
            return False
        since = (
            f"since step {last_step} was written"
            if written is not None
            else "since the rule started"
        )
        self.record(
            message=(
                f"no new step for {number(idle)} s {since} (threshold {self.threshold} s): "
                "the training looks stalled"
            ),
            step=last_step,
            value=idle,
            threshold=self.threshold,
        )
        return True
