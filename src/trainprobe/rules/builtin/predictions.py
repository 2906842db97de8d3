"""Rules about a classifier's labels and predictions: ClassImbalance and Confusion.

Labels are class indices (a vector). Predictions are class indices too, or one row of scores
per sample, turned into indices with argmax (ClassImbalance's ``argmax``; Confusion does it
whenever the predictions have one dimension more than the labels). Save them from a PyTorch
script with ``hook.save_tensor("labels", y, "labels")`` and
``hook.save_tensor("predictions", y_hat, "predictions")``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.selection import TensorSelection

__all__ = ["ClassImbalance", "Confusion", "class_indices"]


def class_indices(values: np.ndarray, scores: bool) -> np.ndarray:
    """Class indices, one per sample: argmax over the last axis when ``values`` are scores.

    One probability per sample (a binary classifier's output, as XGBoost's ``binary:logistic``
    predicts) is class 1 above 0.5, class 0 otherwise.
    """
    array = np.asarray(values)
    if scores and array.ndim >= 1 and array.shape[-1] > 1:
        array = np.argmax(array, axis=-1)
    elif _probabilities(array):
        array = array > 0.5
    return array.reshape(-1).astype(np.int64)


def _probabilities(array: np.ndarray) -> bool:
    """Whether ``array`` holds probabilities rather than class numbers."""
    if not np.issubdtype(array.dtype, np.floating) or array.size == 0:
        return False
    return bool(np.all((array >= 0) & (array <= 1)) and np.any(array != np.round(array)))


class ClassImbalance(BuiltinRule):
    """Fires on a large imbalance between classes, or on many mispredictions in one class.

    Labels (and predictions) are counted over every step seen. Once at least ``samples`` labels
    have been counted, the rule fires when the largest class has more than
    ``threshold_imbalance`` times the samples of the smallest, or when some class's fraction of
    mispredicted samples is above ``threshold_misprediction``.
    """

    def __init__(
        self,
        base_trial: Trial,
        threshold_imbalance: float | str = 10,
        threshold_misprediction: float | str = 0.7,
        samples: int | str = 500,
        argmax: bool | str = False,
        labels_regex: str = ".*labels",
        predictions_regex: str = ".*predictions",
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "ClassImbalance",
            {
                "threshold_imbalance": threshold_imbalance,
                "threshold_misprediction": threshold_misprediction,
                "samples": samples,
                "argmax": argmax,
                "labels_regex": labels_regex,
                "predictions_regex": predictions_regex,
            },
        )
        self.threshold_imbalance = parameters.real("threshold_imbalance")
        self.threshold_misprediction = parameters.real("threshold_misprediction")
        self.samples = parameters.integer("samples")
        self.argmax = parameters.flag("argmax")
        self.labels_regex = parameters.text("labels_regex")
        self.predictions_regex = parameters.text("predictions_regex")
        self._labels = TensorSelection(patterns=parameters.patterns("labels_regex"))
        self._predictions = TensorSelection(patterns=parameters.patterns("predictions_regex"))
        self.counts: Counter[int] = Counter()
        self.mispredicted: Counter[int] = Counter()
        self.predicted: Counter[int] = Counter()

    def _read(self, selection: TensorSelection, step: int, scores: bool) -> np.ndarray | None:
        parts = []
        for name in selection.names(self.base_trial, step):
            value = self.value(name, step)
            if value is not None and value.size:
                parts.append(class_indices(value, scores))
        return np.concatenate(parts) if parts else None

    def invoke_at_step(self, step: int) -> bool:
        """Whether, with the labels counted up to ``step``, the classes are too imbalanced or a
        class too often mispredicted."""
        labels = self._read(self._labels, step, scores=False)
        if labels is None:
            raise self.insufficient(
                f"no labels (names matching {self.labels_regex}) were saved at "
                f"{self.step_words(step)}"
            )
        self.counts.update(labels.tolist())
        predictions = self._read(self._predictions, step, scores=self.argmax)
        if predictions is not None and predictions.shape == labels.shape:
            wrong = labels[predictions != labels]
            self.mispredicted.update(wrong.tolist())
            self.predicted.update(labels.tolist())
        seen = sum(self.counts.values())
        if seen < self.samples:
            return self.nothing_due(
                f"{seen} label(s) counted up to {self.step_words(step)}, fewer than samples "
                f"{self.samples}: "
                "ClassImbalance judges the classes over that many"
            )
        self.has_judged = True
        fired = self._check_imbalance(step, seen)
        return self._check_mispredictions(step) or fired

    def _check_imbalance(self, step: int, seen: int) -> bool:
        largest = max(self.counts, key=self.counts.__getitem__)
        smallest = min(self.counts, key=self.counts.__getitem__)
        ratio = self.counts[largest] / self.counts[smallest]
        if ratio <= self.threshold_imbalance:
            return False
        self.record(
            message=(
                f"class {largest} has {self.counts[largest]} samples and class {smallest} "
                f"{self.counts[smallest]}: a ratio of {number(ratio)} > threshold_imbalance "
                f"{number(self.threshold_imbalance)} after {seen} labels, at "
                f"{self.step_words(step)}"
            ),
            step=step,
            value=ratio,
            threshold=self.threshold_imbalance,
        )
        return True

    def _check_mispredictions(self, step: int) -> bool:
        fired = False
        for label in sorted(self.predicted):
            fraction = self.mispredicted[label] / self.predicted[label]
            if fraction > self.threshold_misprediction:
                fired = True
                self.record(
                    message=(
                        f"class {label}: {self.mispredicted[label]} of its "
                        f"{self.predicted[label]} samples were mispredicted, a fraction of "
                        f"{number(fraction)} > threshold_misprediction "
                        f"{number(self.threshold_misprediction)}, at {self.step_words(step)}"
                    ),
                    step=step,
                    value=fraction,
                    threshold=self.threshold_misprediction,
                )
        return fired


class Confusion(BuiltinRule):
    """Fires when the confusion matrix of a classifier is too far from diagonal.

    At each step it builds the matrix ``confusion[label][prediction]`` from the labels and
    predictions saved there (``category_no`` classes, by default 1 + the largest index seen),
    and fires when:

    - for a class i with samples, ``confusion[i][i] / sum_j confusion[i][j] < min_diag``: too
      few of its samples were predicted right (the spec's formula divides by the diagonal's sum,
      which would make every balanced classifier with more than one class fail, so the row sum
      is used, the share of class i's samples on the diagonal); or
    - for an off-diagonal cell, ``confusion[j][i] / sum_j confusion[j][i] > max_off_diag``: too
      many of the samples predicted as i belong to class j (the spec's formula, per column).

    Labels are the tensor named ``labels`` or, when there is none, the tensors of the
    ``labels_collection`` collection; predictions likewise.
    """

    def __init__(
        self,
        base_trial: Trial,
        category_no: int | str | None = None,
        labels: str = "labels",
        predictions: str = "predictions",
        labels_collection: str = "labels",
        predictions_collection: str = "predictions",
        min_diag: float | str = 0.9,
        max_off_diag: float | str = 0.1,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "Confusion",
            {
                "category_no": category_no,
                "labels": labels,
                "predictions": predictions,
                "labels_collection": labels_collection,
                "predictions_collection": predictions_collection,
                "min_diag": min_diag,
                "max_off_diag": max_off_diag,
            },
        )
        self.category_no = parameters.optional_integer("category_no")
        self.labels = parameters.text("labels")
        self.predictions = parameters.text("predictions")
        self.labels_collection = parameters.text("labels_collection")
        self.predictions_collection = parameters.text("predictions_collection")
        self.min_diag = parameters.real("min_diag")
        self.max_off_diag = parameters.real("max_off_diag")

    def _read(self, name: str, collection: str, step: int, scores: bool) -> np.ndarray | None:
        names = self.base_trial.tensor_names(step=step)
        if name in names:
            chosen = [name]
        else:
            chosen = TensorSelection(collections=(collection,)).filter(self.base_trial, names)
        parts = []
        for tensor_name in chosen:
            value = self.value(tensor_name, step)
            if value is not None and value.size:
                parts.append(value)
        if not parts:
            return None
        return np.concatenate([class_indices(part, scores and part.ndim >= 2) for part in parts])

    def invoke_at_step(self, step: int) -> bool:
        """Whether the confusion matrix of ``step``'s labels and predictions is too far from
        diagonal."""
        labels = self._read(self.labels, self.labels_collection, step, scores=False)
        predictions = self._read(self.predictions, self.predictions_collection, step, scores=True)
        if labels is None or predictions is None:
            raise self.insufficient(
                f"labels ({self.labels!r} or collection {self.labels_collection!r}) and "
                f"predictions ({self.predictions!r} or collection "
                f"{self.predictions_collection!r}) were not both saved at {self.step_words(step)}"
            )
        if labels.shape != predictions.shape:
            raise self.insufficient(
                f"at {self.step_words(step)} there are {labels.size} labels but "
                f"{predictions.size} predictions"
            )
        categories = self.category_no or int(max(labels.max(), predictions.max())) + 1
        inside = (labels >= 0) & (labels < categories) & (predictions >= 0)
        inside &= predictions < categories
        matrix = np.zeros((categories, categories), dtype=np.int64)
        np.add.at(matrix, (labels[inside], predictions[inside]), 1)
        return self._check(matrix, step)

    def _check(self, matrix: np.ndarray, step: int) -> bool:
        fired = False
        rows = matrix.sum(axis=1)
        columns = matrix.sum(axis=0)
        for i in range(matrix.shape[0]):
            if rows[i] == 0:
                continue
            share = matrix[i, i] / rows[i]
            if share < self.min_diag:
                fired = True
                self.record(
                    message=(
                        f"class {i}: {matrix[i, i]} of its {rows[i]} samples were predicted "
                        f"as {i}, a ratio of {number(share)} < min_diag "
                        f"{number(self.min_diag)} at {self.step_words(step)}"
                    ),
                    step=step,
                    value=share,
                    threshold=self.min_diag,
                )
        for i in range(matrix.shape[1]):
            for j in range(matrix.shape[0]):
                if i == j or columns[i] == 0 or matrix[j, i] == 0:
                    continue
                share = matrix[j, i] / columns[i]
                if share > self.max_off_diag:
                    fired = True
                    self.record(
                        message=(
                            f"{matrix[j, i]} of the {columns[i]} samples predicted as class "
                            f"{i} are of class {j}: a ratio of {number(share)} > max_off_diag "
                            f"{number(self.max_off_diag)} at {self.step_words(step)}"
                        ),
                        step=step,
                        value=share,
                        threshold=self.max_off_diag,
                    )
        return fired
