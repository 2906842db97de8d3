"""The XGBoost training report's content, read from a job's tensors and its rules' statuses.

What SageMaker's CreateXgboostReport shows, from what the XGBoost hook saved: the
hyperparameters, the label distribution, every metric per round for every evaluation set, the
feature importances of the last round, and, from the validation set's labels and predictions,
the confusion matrix and per-class precision, recall and F1 with the accuracy per round
(classification), the ROC curve and its AUC (binary classification) or the distribution of the
residuals (regression); then the verdicts of the job's other rules. A part whose tensors were not
saved is None, and the page says what to save for it.

The task is the ``objective`` hyperparameter's (``binary:``, ``multi:``, else regression) when it
was saved; otherwise it is read from the data: one probability per sample and labels 0/1 are a
binary classification, one row of probabilities per sample a multi-class one.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.storage import files
from trainprobe.storage.rule_output import read_status

__all__ = ["METRIC_NAME", "xgboost_report_content"]

METRIC_NAME = re.compile(r"^(?P<set>[A-Za-z_][A-Za-z0-9_]*)-(?P<metric>[^/]+)$")
_HISTOGRAM_BINS = 30
_ROC_POINTS = 200


def _values_by_step(trial: Trial, name: str) -> tuple[list[int], list[np.ndarray]]:
    tensor = trial.tensor(name)
    steps = tensor.steps()
    return steps, [np.asarray(tensor.value(step)) for step in steps]


def _scalar(value: np.ndarray) -> int | float | str:
    """A one-element tensor's value: a whole number stays whole (``max_depth`` 3, not 3.0)."""
    flat = np.asarray(value).reshape(-1)
    item = flat[0] if flat.size else ""
    if flat.dtype.kind in "US":
        return str(item)
    return int(item) if flat.dtype.kind in "iub" else float(item)


def _hyperparameters(trial: Trial, names: Sequence[str]) -> dict[str, int | float | str]:
    found = {}
    for name in names:
        if name.startswith("hyperparameters/"):
            steps, values = _values_by_step(trial, name)
            if steps:
                found[name.removeprefix("hyperparameters/")] = _scalar(values[0])
    return found


def _metrics(trial: Trial, names: Sequence[str]) -> list[dict[str, Any]]:
    """One entry per metric: its rounds and values for every evaluation set."""
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        match = METRIC_NAME.match(name)
        if match is None:
            continue
        steps, values = _values_by_step(trial, name)
        by_metric.setdefault(match["metric"], []).append(
            {"Set": match["set"], "Rounds": steps, "Values": [float(_scalar(v)) for v in values]}
        )
    return [{"Metric": metric, "Sets": sets} for metric, sets in sorted(by_metric.items())]


def _importances(trial: Trial, names: Sequence[str]) -> list[dict[str, Any]]:
    by_type: dict[str, dict[str, float]] = {}
    for name in names:
        parts = name.split("/", 2)
        if len(parts) != 3 or parts[0] != "feature_importance":
            continue
        steps, values = _values_by_step(trial, name)
        if steps:
            by_type.setdefault(parts[1], {})[parts[2]] = float(_scalar(values[-1]))
    result = []
    for kind, features in sorted(by_type.items()):
        ordered = sorted(features.items(), key=lambda item: item[1], reverse=True)
        result.append(
            {
                "Type": kind,
                "Features": [feature for feature, _ in ordered],
                "Importance": [value for _, value in ordered],
            }
        )
    return result


def _task(
    hyperparameters: dict[str, int | float | str], labels: np.ndarray, scores: np.ndarray
) -> str:
    objective = str(hyperparameters.get("objective", ""))
    if objective.startswith("binary:"):
        return "binary"
    if objective.startswith("multi:"):
        return "multiclass"
    if objective.startswith(("reg:", "count:", "survival:", "rank:")):
        return "regression"
    integral = bool(np.all(labels == np.round(labels)))
    if scores.ndim == 2 and scores.shape[1] > 1 and integral:
        return "multiclass"
    if integral and set(np.unique(labels)) <= {0.0, 1.0} and np.all((scores >= 0) & (scores <= 1)):
        return "binary"
    return "regression"


def _classes(scores: np.ndarray, task: str) -> np.ndarray:
    if scores.ndim == 2 and scores.shape[1] > 1:
        return np.asarray(np.argmax(scores, axis=1))
    if task == "binary":
        return (scores.reshape(-1) > 0.5).astype(np.int64)
    return np.round(scores.reshape(-1)).astype(np.int64)


def _confusion(labels: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    classes = int(max(labels.max(initial=0), predicted.max(initial=0))) + 1
    matrix = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(matrix, (labels, predicted), 1)
    rows = []
    for index in range(classes):
        true_positive = int(matrix[index, index])
        support = int(matrix[index].sum())
        predicted_count = int(matrix[:, index].sum())
        precision = true_positive / predicted_count if predicted_count else 0.0
        recall = true_positive / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        rows.append(
            {
                "Class": index,
                "Precision": precision,
                "Recall": recall,
                "F1": f1,
                "Support": support,
            }
        )
    return {"Matrix": matrix.tolist(), "Classes": list(range(classes)), "PerClass": rows}


def _roc(labels: np.ndarray, scores: np.ndarray) -> dict[str, Any] | None:
    positives, negatives = int(np.sum(labels == 1)), int(np.sum(labels == 0))
    if positives == 0 or negatives == 0:
        return None
    order = np.argsort(-scores, kind="stable")
    ordered_scores, ordered_labels = scores[order], labels[order]
    # One point per distinct threshold: the last index of each run of equal scores.
    ends = np.r_[np.nonzero(np.diff(ordered_scores))[0], ordered_scores.size - 1]
    true_positive = np.cumsum(ordered_labels == 1)[ends]
    false_positive = np.cumsum(ordered_labels == 0)[ends]
    tpr = np.r_[0.0, true_positive / positives]
    fpr = np.r_[0.0, false_positive / negatives]
    auc = float(np.trapezoid(tpr, fpr))
    keep = np.unique(np.linspace(0, tpr.size - 1, min(tpr.size, _ROC_POINTS)).astype(int))
    return {
        "FalsePositiveRate": fpr[keep].tolist(),
        "TruePositiveRate": tpr[keep].tolist(),
        "AUC": auc,
    }


def _histogram(values: np.ndarray) -> dict[str, Any]:
    counts, edges = np.histogram(values, bins=_HISTOGRAM_BINS)
    return {"Counts": counts.tolist(), "Edges": edges.tolist()}


def _evaluation(
    trial: Trial, names: Sequence[str], hyperparameters: dict[str, int | float | str]
) -> dict[str, Any]:
    """The label distribution and what the labels and predictions say, by the task."""
    if "labels" not in names:
        return {"Task": None, "Labels": None}
    label_steps, label_values = _values_by_step(trial, "labels")
    labels = label_values[-1].reshape(-1).astype(np.float64)
    predictions_saved = "predictions" in names
    scores = (
        np.asarray(trial.tensor("predictions").value(label_steps[-1]), dtype=np.float64)
        if predictions_saved and label_steps[-1] in trial.tensor("predictions").steps()
        else None
    )
    task = _task(hyperparameters, labels, scores if scores is not None else labels)
    evaluation: dict[str, Any] = {"Task": task, "Round": label_steps[-1]}
    if task == "regression":
        evaluation["Labels"] = {"Histogram": _histogram(labels)}
        if scores is not None:
            residuals = scores.reshape(-1) - labels
            evaluation["Residuals"] = {
                "Histogram": _histogram(residuals),
                "Mean": float(np.mean(residuals)),
                "RootMeanSquare": float(np.sqrt(np.mean(residuals**2))),
            }
        return evaluation
    classes, counts = np.unique(labels.astype(np.int64), return_counts=True)
    evaluation["Labels"] = {"Classes": classes.tolist(), "Counts": counts.tolist()}
    if scores is None:
        return evaluation
    integer_labels = labels.astype(np.int64)
    evaluation["Confusion"] = _confusion(integer_labels, _classes(scores, task))
    if task == "binary":
        evaluation["ROC"] = _roc(integer_labels, scores.reshape(-1))
    accuracy_rounds, accuracy = [], []
    prediction_steps = set(trial.tensor("predictions").steps())
    for step, value in zip(label_steps, label_values, strict=True):
        if step in prediction_steps:
            predicted = _classes(np.asarray(trial.tensor("predictions").value(step)), task)
            accuracy_rounds.append(step)
            accuracy.append(float(np.mean(predicted == value.reshape(-1).astype(np.int64))))
    evaluation["Accuracy"] = {"Rounds": accuracy_rounds, "Values": accuracy}
    return evaluation


def _rules(rule_output_root: str | None, own_rule: str | None) -> list[dict[str, Any]]:
    if rule_output_root is None:
        return []
    found = []
    for name in files.child_names(rule_output_root):
        if name == own_rule:
            continue
        status = read_status(os.path.join(rule_output_root, name))
        if status is not None:
            found.append(
                {
                    "Rule": status.rule_configuration_name,
                    "Status": status.rule_evaluation_status,
                    "Details": status.status_details,
                }
            )
    return found


def xgboost_report_content(
    trial: Trial, job_name: str, rule_output_root: str | None, own_rule: str | None
) -> dict[str, Any]:
    """The report's content (JSON data) for the job ``job_name`` whose tensors ``trial`` reads;
    the rules are those under ``rule_output_root`` but ``own_rule`` (the report's own)."""
    names = trial.tensor_names()
    hyperparameters = _hyperparameters(trial, names)
    return {
        "Job": job_name,
        "GeneratedAt": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()),
        "Rounds": trial.steps(),
        "Hyperparameters": hyperparameters,
        "Metrics": _metrics(trial, names),
        "FeatureImportance": _importances(trial, names),
        "Evaluation": _evaluation(trial, names, hyperparameters),
        "Rules": _rules(rule_output_root, own_rule),
    }
