"""Training and validation losses told apart by name, as XGBoost's metrics are named.

XGBoost evaluates every round on each evaluation set and the hook saves the result as
``<set>-<metric>`` (``train-logloss``, ``validation-logloss``), all in GLOBAL mode: the rules that
compare training with validation losses (Overfit, Overtraining) read the role from the name. The
training set is ``train`` (or ``training``, ``dtrain``); with the scikit-learn API's
``validation_0``, ``validation_1``, ... and no such name, ``validation_0`` is taken for the
training data (``eval_set=[(X_train, y_train), (X_val, y_val)]``, as XGBoost's own examples do).
Every other set is a validation set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["MetricPair", "metric_pairs", "validation_names"]

_NAME = re.compile(r"^(?P<set>[A-Za-z_][A-Za-z0-9_]*)-(?P<metric>[^/]+)$")
_TRAINING_SETS = ("train", "training", "dtrain")
_SKLEARN_FIRST = "validation_0"


@dataclass(frozen=True)
class MetricPair:
    """One metric on the training set and on one validation set."""

    metric: str
    training: str
    validation: str


def _split(names: Iterable[str]) -> dict[str, tuple[str, str]] | None:
    """``{name: (set, metric)}``, or None when a name is not ``<set>-<metric>``."""
    found = {}
    for name in names:
        match = _NAME.match(name)
        if match is None:
            return None
        found[name] = (match["set"], match["metric"])
    return found or None


def _training_set(sets: set[str]) -> str | None:
    for name in _TRAINING_SETS:
        if name in sets:
            return name
    if _SKLEARN_FIRST in sets and len(sets) > 1:
        return _SKLEARN_FIRST
    return None


def validation_names(names: Iterable[str]) -> set[str] | None:
    """The validation losses among ``names`` (the others are training losses), or None when
    the names are not XGBoost's ``<set>-<metric>`` with a training set among them."""
    split = _split(names)
    if split is None:
        return None
    training = _training_set({data_set for data_set, _ in split.values()})
    if training is None:
        return None
    return {name for name, (data_set, _) in split.items() if data_set != training}


def metric_pairs(names: Iterable[str]) -> list[MetricPair]:
    """Each validation loss among ``names`` with the training loss of the same metric."""
    split = _split(names)
    if split is None:
        return []
    training = _training_set({data_set for data_set, _ in split.values()})
    if training is None:
        return []
    by_metric = {metric: name for name, (data_set, metric) in split.items() if data_set == training}
    return [
        MetricPair(metric, by_metric[metric], name)
        for name, (data_set, metric) in sorted(split.items())
        if data_set != training and metric in by_metric
    ]
