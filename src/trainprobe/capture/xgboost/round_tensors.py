"""What the XGBoost hook saves of a boosting round, as (name, numpy array) pairs, smdebug's names.

- metrics: ``<evaluation set>-<metric>``, the round's value (``train-rmse``,
  ``validation_0-logloss``);
- ``hyperparameters/<name>``;
- ``predictions`` (the model's output on the validation data) and ``labels`` (its labels);
- ``feature_importance/<type>/<feature>`` for weight, gain, cover, total_gain and total_cover,
  each normalised by the type's total (0 for a feature no tree uses);
- ``average_shap/<feature>`` (the mean SHAP value, from xgboost's ``pred_contribs``) and
  ``full_shap/<feature>`` (the feature's SHAP value for every row; smdebug saved the whole
  matrix under every name);
- ``trees/<column>``: the columns of ``trees_to_dataframe`` for the trees this round added, with
  the trees numbered in the whole model (smdebug took one tree per round, which misses the other
  classes' trees in a multi-class model).

Single numbers are saved as one-element vectors and the text columns of the trees as strings
(``"nan"`` where empty), as smdebug saved them. Each group is computed only when the hook asks
for it (a collection due that may hold it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import xgboost as xgb

__all__ = [
    "IMPORTANCE_TYPES",
    "TREE_BOOSTERS",
    "booster_kind",
    "feature_importances",
    "feature_names",
    "hyperparameter_tensors",
    "metric_tensors",
    "shap_tensors",
    "tree_tensors",
]

IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")
TREE_BOOSTERS = frozenset({"gbtree", "dart"})
_TEXT_COLUMNS = frozenset({"ID", "Feature", "Yes", "No", "Missing", "Category"})

Named = Iterator[tuple[str, np.ndarray]]


def booster_kind(model: xgb.Booster) -> str:
    """The booster of ``model``: gbtree, dart or gblinear."""
    config = json.loads(model.save_config())
    return str(config["learner"]["gradient_booster"]["name"])


def feature_names(model: xgb.Booster) -> list[str]:
    """The model's feature names, or ``f0, f1, ...`` when it has none (as xgboost names them)."""
    names = model.feature_names
    if names:
        return list(names)
    return [f"f{index}" for index in range(model.num_features())]


def metric_tensors(evals_log: Mapping[str, Mapping[str, Any]]) -> Named:
    """``<set>-<metric>`` and the round's value, for every evaluation set and metric."""
    for data_name, metrics in evals_log.items():
        for metric, history in metrics.items():
            if not history:
                continue
            last = history[-1]
            value = last[0] if isinstance(last, tuple) else last  # (mean, std) under cv
            yield f"{data_name}-{metric}", _one(float(value))


def hyperparameter_tensors(hyperparameters: Mapping[str, Any]) -> Named:
    """``hyperparameters/<name>``: numbers as numbers, anything else as its text."""
    for name, value in hyperparameters.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            yield f"hyperparameters/{name}", np.asarray([str(value)])
        else:
            yield f"hyperparameters/{name}", np.asarray([value])


def feature_importances(model: xgb.Booster) -> Named:
    """``feature_importance/<type>/<feature>``, normalised by the type's total, for every
    feature: one the trees never split on has importance 0 (xgboost, and smdebug, leave it
    out, which hides from FeatureImportanceOverweight how few features the model uses)."""
    names = feature_names(model)
    for kind in IMPORTANCE_TYPES:
        scores = model.get_score(importance_type=kind)
        total = float(sum(float(np.sum(v)) for v in scores.values()))
        if total <= 0:
            continue
        for feature in names:
            score = float(np.sum(scores.get(feature, 0.0)))
            yield f"feature_importance/{kind}/{feature}", _one(score / total)


def shap_tensors(model: xgb.Booster, data: xgb.DMatrix, *, full: bool, average: bool) -> Named:
    """``full_shap/<feature>`` and/or ``average_shap/<feature>`` (and ``/bias``) on ``data``."""
    contributions = np.asarray(model.predict(data, pred_contribs=True))
    names = [*feature_names(model), "bias"]
    means = contributions.reshape(-1, contributions.shape[-1]).mean(axis=0) if average else None
    for index, name in enumerate(names):
        if full:
            yield f"full_shap/{name}", np.ascontiguousarray(contributions[..., index])
        if means is not None:
            yield f"average_shap/{name}", _one(float(means[index]))


def tree_tensors(model: xgb.Booster, iteration: int) -> Named:
    """``trees/<column>``: ``trees_to_dataframe`` of the trees round ``iteration`` added."""
    frame = model[iteration : iteration + 1].trees_to_dataframe()
    if frame.empty:
        return
    per_round = int(frame["Tree"].max()) + 1
    offset = iteration * per_round
    if offset:
        frame["Tree"] = frame["Tree"] + offset
        for column in ("ID", "Yes", "No", "Missing"):
            frame[column] = [_renumber(value, offset) for value in frame[column]]
    for column in frame.columns:
        values = frame[column].to_numpy()
        if column in _TEXT_COLUMNS or values.dtype == object:
            values = np.asarray([_text(value) for value in values])
        yield f"trees/{column}", np.ascontiguousarray(values)


def _one(value: float) -> np.ndarray:
    return np.asarray([value], dtype=np.float64)


def _renumber(node_id: object, offset: int) -> object:
    """``"<tree>-<node>"`` with the tree number moved by ``offset``; anything else as it is."""
    if not isinstance(node_id, str) or "-" not in node_id:
        return node_id
    tree, node = node_id.split("-", 1)
    return f"{int(tree) + offset}-{node}" if tree.isdigit() else node_id


def _text(value: object) -> str:
    if isinstance(value, float) and np.isnan(value):
        return "nan"
    return str(value)
