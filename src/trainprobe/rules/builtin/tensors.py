"""Rules about any tensor's values: ExplodingTensor, AllZero, TensorVariance, UnchangedTensor.

Each inspects the tensors of ``collection_names`` and ``tensor_regex`` (their union) saved at
the step being evaluated. They read the raw value when it was saved; when only reductions were
saved they judge from those where that is possible (a NaN shows in every reduction, an all-zero
tensor has an absolute maximum of 0, a variance is a saved variance or std squared).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.config.errors import ConfigError
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.selection import TensorSelection
from trainprobe.storage.modes import ModeKeys

__all__ = ["AllZero", "ExplodingTensor", "TensorVariance", "UnchangedTensor"]


def _selection(parameters: Parameters, everything: bool = False) -> TensorSelection:
    return TensorSelection(
        collections=parameters.texts("collection_names"),
        patterns=parameters.patterns("tensor_regex"),
        everything=everything,
    )


class _SelectedTensorsRule(BuiltinRule):
    """A rule over the tensors of ``collection_names`` and ``tensor_regex``."""

    selection: TensorSelection

    def selected(self, step: int) -> list[str]:
        """The selected tensors saved at ``step``; raises when there are none to judge."""
        names = self.selection.names(self.base_trial, step)
        if not names:
            raise self.insufficient(
                f"no tensor of {self.selection.describe()} was saved at {self.step_words(step)}"
            )
        return names


class ExplodingTensor(_SelectedTensorsRule):
    """Fires when a tensor holds NaN, or an infinite value unless ``only_nan``.

    With neither ``collection_names`` nor ``tensor_regex`` it inspects every saved tensor.
    When it fires, its first piece of evidence says where the first NaN started, as the
    PyTorch hook's non-finite guard recorded it ("step 7: first NaN in the output of `body.2`
    (its inputs were finite); the loss became NaN at the same step").
    """

    def __init__(
        self,
        base_trial: Trial,
        collection_names: Sequence[str] | str | None = None,
        tensor_regex: Sequence[str] | str | None = None,
        only_nan: bool | str = False,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "ExplodingTensor",
            {
                "collection_names": collection_names,
                "tensor_regex": tensor_regex,
                "only_nan": only_nan,
            },
        )
        self.collection_names = parameters.texts("collection_names")
        self.tensor_regex = parameters.texts("tensor_regex")
        self.only_nan = parameters.flag("only_nan")
        self.selection = _selection(parameters, everything=True)

    def invoke_at_step(self, step: int) -> bool:
        """Whether a selected tensor holds a non-finite value at ``step``; the evidence starts
        with where the first one came from, when the hook recorded it."""
        found: list[tuple[str, int, int, int, int]] = []
        judged = False
        for name in self.selected(step):
            counts = self._non_finite(name, step)
            if counts is None:
                continue
            judged = True
            nans, infinities, size = counts
            bad = nans if self.only_nan else nans + infinities
            if bad:
                found.append((name, bad, nans, infinities, size))
        if not judged:
            raise self.insufficient(
                f"neither values nor reductions of {self.selection.describe()} at "
                f"{self.step_words(step)}"
            )
        if found:
            self._record_origin(step)
        what = "NaN" if self.only_nan else "non-finite (NaN or infinite)"
        for name, bad, nans, infinities, size in found:
            self.record(
                message=(
                    f"{name}: {bad} {what} value(s) of {size} at {self.step_words(step)} "
                    f"({nans} NaN, {infinities} infinite)"
                ),
                tensor=name,
                step=step,
                value=bad,
                threshold=0,
            )
        return bool(found)

    def _record_origin(self, step: int) -> None:
        """Evidence of where the first NaN or infinity started (the hook's non-finite guard)."""
        origin = self.base_trial.nonfinite_origin()
        if origin is None or origin.step > step:
            return
        self.record(message=origin.describe(), tensor=origin.tensor, step=origin.step)

    def _non_finite(self, name: str, step: int) -> tuple[int, int, int] | None:
        """(NaN count, infinite count, element count) at ``step``; from reductions when only
        they were saved (each non-finite reduction counts once); None when nothing was saved."""
        value = self.value(name, step)
        if value is not None:
            if not (np.issubdtype(value.dtype, np.floating) or np.iscomplexobj(value)):
                return 0, 0, int(value.size)
            if np.isfinite(value.sum()):
                # One pass: a sum is finite only if every value is (an overflow is counted).
                return 0, 0, int(value.size)
            return int(np.isnan(value).sum()), int(np.isinf(value).sum()), int(value.size)
        reductions = list(self.saved_reductions(name, step).values())
        if not reductions:
            return None
        array = np.asarray(reductions, dtype=np.float64)
        return int(np.isnan(array).sum()), int(np.isinf(array).sum()), len(reductions)


class AllZero(_SelectedTensorsRule):
    """Fires when at least ``threshold`` percent of a tensor's values are zero (all by default)."""

    def __init__(
        self,
        base_trial: Trial,
        collection_names: Sequence[str] | str | None = None,
        tensor_regex: Sequence[str] | str | None = None,
        threshold: float | str = 100,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "AllZero",
            {
                "collection_names": collection_names,
                "tensor_regex": tensor_regex,
                "threshold": threshold,
            },
        )
        self.collection_names = parameters.texts("collection_names")
        self.tensor_regex = parameters.texts("tensor_regex")
        self.threshold = parameters.real("threshold")
        self.selection = _selection(parameters)

    def invoke_at_step(self, step: int) -> bool:
        """Whether a selected tensor is at least ``threshold`` percent zeros at ``step``."""
        fired = False
        judged = False
        for name in self.selected(step):
            percent = self._zero_percent(name, step)
            if percent is None:
                continue
            judged = True
            if percent >= self.threshold:
                fired = True
                self.record(
                    message=(
                        f"{name}: {number(percent)}% of its values are zero at "
                        f"{self.step_words(step)} "
                        f"(threshold {number(self.threshold)}%)"
                    ),
                    tensor=name,
                    step=step,
                    value=percent,
                    threshold=self.threshold,
                )
        if not judged:
            raise self.insufficient(
                f"the values of {self.selection.describe()} were not saved at "
                f"{self.step_words(step)}"
            )
        return fired

    def _zero_percent(self, name: str, step: int) -> float | None:
        value = self.value(name, step)
        if value is not None:
            if value.size == 0:
                return None
            return 100.0 * float(np.count_nonzero(value == 0)) / value.size
        # Only reductions: an absolute maximum of 0 means every value is 0; anything else
        # says too little about how many values are zero.
        largest = self.reduction(name, step, "max", of_abs=True)
        if largest is None:
            return None
        return 100.0 if largest == 0 else None


class TensorVariance(_SelectedTensorsRule):
    """Fires when a tensor's variance is above ``max_threshold`` or below ``min_threshold``."""

    def __init__(
        self,
        base_trial: Trial,
        collection_names: Sequence[str] | str | None = None,
        tensor_regex: Sequence[str] | str | None = None,
        max_threshold: float | str | None = None,
        min_threshold: float | str | None = None,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "TensorVariance",
            {
                "collection_names": collection_names,
                "tensor_regex": tensor_regex,
                "max_threshold": max_threshold,
                "min_threshold": min_threshold,
            },
        )
        self.collection_names = parameters.texts("collection_names")
        self.tensor_regex = parameters.texts("tensor_regex")
        self.max_threshold = parameters.optional_real("max_threshold")
        self.min_threshold = parameters.optional_real("min_threshold")
        if self.max_threshold is None and self.min_threshold is None:
            raise ConfigError(
                "TensorVariance",
                {"max_threshold": None, "min_threshold": None},
                "TensorVariance needs max_threshold, min_threshold or both",
            )
        self.selection = _selection(parameters)

    def invoke_at_step(self, step: int) -> bool:
        """Whether a selected tensor's variance is out of bounds at ``step``."""
        fired = False
        judged = False
        for name in self.selected(step):
            variance = self.reduction(name, step, "variance")
            if variance is None:
                continue
            judged = True
            if self.max_threshold is not None and variance > self.max_threshold:
                fired = True
                self._record(name, step, variance, ">", self.max_threshold)
            if self.min_threshold is not None and variance < self.min_threshold:
                fired = True
                self._record(name, step, variance, "<", self.min_threshold)
        if not judged:
            raise self.insufficient(
                f"neither the values nor a variance or std of {self.selection.describe()} "
                f"were saved at {self.step_words(step)}"
            )
        return fired

    def _record(self, name: str, step: int, variance: float, sign: str, bound: float) -> None:
        self.record(
            message=(
                f"{name}: variance {number(variance)} {sign} threshold {number(bound)} "
                f"at {self.step_words(step)}"
            ),
            tensor=name,
            step=step,
            value=variance,
            threshold=bound,
        )


class UnchangedTensor(_SelectedTensorsRule):
    """Fires when a tensor has not changed over its last ``num_steps`` saved steps.

    The steps need not be consecutive: at step s the rule compares s with the latest earlier
    steps the tensor was saved at, in the same mode as s (an EVAL step is compared with EVAL
    steps), every pair with ``numpy.allclose(rtol, atol, equal_nan)``. ``num_steps`` counts s
    itself; 1 is read as 2 (the step and the one before), since one step cannot change.
    """

    def __init__(
        self,
        base_trial: Trial,
        collection_names: Sequence[str] | str | None = None,
        tensor_regex: Sequence[str] | str | None = None,
        num_steps: int | str = 3,
        rtol: float | str = 1e-05,
        atol: float | str = 1e-08,
        equal_nan: bool | str = False,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "UnchangedTensor",
            {
                "collection_names": collection_names,
                "tensor_regex": tensor_regex,
                "num_steps": num_steps,
                "rtol": rtol,
                "atol": atol,
                "equal_nan": equal_nan,
            },
        )
        self.collection_names = parameters.texts("collection_names")
        self.tensor_regex = parameters.texts("tensor_regex")
        self.num_steps = parameters.integer("num_steps")
        self.rtol = parameters.real("rtol")
        self.atol = parameters.real("atol")
        self.equal_nan = parameters.flag("equal_nan")
        self.selection = _selection(parameters)
        self._window = max(2, self.num_steps)
        self._recent: dict[tuple[str, ModeKeys | None], deque[int]] = {}

    def invoke_at_step(self, step: int) -> bool:
        """Whether a selected tensor equals itself over its last ``num_steps`` saved steps."""
        mode = self.base_trial.mode(step)
        fired = False
        judged = False
        for name in self.selected(step):
            if self.value(name, step) is None:
                continue
            judged = True
            recent = self._recent.setdefault((name, mode), deque(maxlen=self._window))
            if not recent or recent[-1] < step:
                recent.append(step)
            if len(recent) < self._window:
                continue
            self.has_judged = True
            steps = list(recent)
            if self._unchanged(name, steps):
                fired = True
                self.record(
                    message=(
                        f"{name} has not changed over {len(steps)} saved steps, from "
                        f"{self.step_words(steps[0])} to {self.step_words(steps[-1])} "
                        f"(numpy.allclose with rtol={number(self.rtol)}, "
                        f"atol={number(self.atol)})"
                    ),
                    tensor=name,
                    step=step,
                    value=steps,
                    threshold=self.num_steps,
                )
        if not judged:
            raise self.insufficient(
                f"the values of {self.selection.describe()} were not saved at "
                f"{self.step_words(step)} "
                "(UnchangedTensor compares raw values, not reductions)"
            )
        return fired or self.nothing_due(
            f"{self.selection.describe()} was saved at fewer than {self._window} steps of a "
            f"mode yet, as of {self.step_words(step)}: UnchangedTensor compares num_steps "
            f"{self.num_steps} saved steps"
        )

    def _unchanged(self, name: str, steps: list[int]) -> bool:
        values = [self.value(name, step) for step in steps]
        arrays = [value for value in values if value is not None]
        if len(arrays) < len(steps):
            return False
        for first, second in itertools.combinations(arrays, 2):
            if first.shape != second.shape:
                return False
            # A sample that differs settles it without a pass over the whole tensor.
            stride = max(1, first.size // 256)
            for a, b in (
                (first.reshape(-1)[::stride], second.reshape(-1)[::stride]),
                (first, second),
            ):
                if not np.allclose(a, b, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan):
                    return False
        return True
