"""SimilarAcrossRuns: this job's tensors compared with another trial's, step by step."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trainprobe.analysis.trial import Trial, create_trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.selection import TensorSelection

__all__ = ["SimilarAcrossRuns"]


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
            if mine.shape == theirs.shape and (
                np.array_equal(mine, theirs)  # equal values, the common case, in one pass
                or (_floating(mine) and np.array_equal(mine, theirs, equal_nan=True))
                or np.allclose(mine, theirs, equal_nan=True)
            ):
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
                    f"{name} differs from {other.name}'s at {self.step_words(step)} ({detail}; "
                    "numpy.allclose with rtol=1e-05, atol=1e-08)"
                ),
                tensor=name,
                step=step,
                value=difference,
            )
        if not compared:
            raise self.insufficient(
                f"no tensor of {self.selection.describe()} was saved (raw) at "
                f"{self.step_words(step)} in "
                f"both {self.base_trial.name} and {other.name}"
            )
        return fired


def _floating(array: np.ndarray) -> bool:
    """Whether ``array`` can hold a NaN (``array_equal``'s ``equal_nan`` needs one that can)."""
    return array.dtype.kind in "fc"
