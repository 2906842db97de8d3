"""ClassImbalance and Confusion on hand-made trials, with smdebug's deleted test vectors
(reference/smdebug.md §4.3) and the thresholds' boundaries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from builtin_trials import TrialBuilder, evidence_of, fired_steps

from trainprobe.rules.builtin import ClassImbalance, Confusion


def test_class_imbalance_old_vector(tmp_path: Path) -> None:
    data = np.zeros(1000)
    data[-10:] = 1
    trial = TrialBuilder(tmp_path).add(3, "labels_0", data).write()
    rule = ClassImbalance(trial, labels_regex="labels_0", predictions_regex="labels_0")
    assert fired_steps(rule) == [3]
    (evidence,) = evidence_of(rule)
    assert evidence.value == 99.0
    assert "class 0 has 990 samples and class 1 10" in evidence.message


def _labels(*counts: int) -> np.ndarray:
    return np.concatenate([np.full(count, label) for label, count in enumerate(counts)])


def test_class_imbalance_ratio_boundary_and_samples(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "labels", _labels(200, 20))  # ratio 10: not above the threshold
        .add(1, "labels", _labels(203, 20))  # 403 against 40: 10.075
        .write()
    )
    # With 220 labels to see first, step 0 is judged (ratio 10: fine), then step 1.
    assert fired_steps(ClassImbalance(trial, samples=220)) == [1]
    # Nothing is judged before `samples` labels were counted (443 after step 1).
    assert fired_steps(ClassImbalance(trial)) == []
    assert fired_steps(ClassImbalance(trial, samples=444)) == []
    assert fired_steps(ClassImbalance(trial, samples=443)) == [1]


def test_class_imbalance_mispredictions_per_class(tmp_path: Path) -> None:
    labels = _labels(500, 10)
    predictions = labels.copy()
    predictions[-8:] = 0  # 8 of class 1's 10 samples wrong: 0.8
    near = labels.copy()
    near[-7:] = 0  # 7 of 10: exactly the threshold
    trial = (
        TrialBuilder(tmp_path).add(0, "labels", labels).add(0, "predictions", predictions).write()
    )
    rule = ClassImbalance(trial, threshold_imbalance=100)
    assert fired_steps(rule) == [0]
    (evidence,) = evidence_of(rule)
    assert evidence.value == pytest.approx(0.8)
    assert "class 1: 8 of its 10 samples were mispredicted" in evidence.message
    trial = TrialBuilder(tmp_path / "b").add(0, "labels", labels).add(0, "predictions", near)
    assert fired_steps(ClassImbalance(trial.write(), threshold_imbalance=100)) == []


def test_class_imbalance_argmax_of_scores(tmp_path: Path) -> None:
    labels = _labels(300, 300)
    scores = np.zeros((600, 2))
    scores[:, 0] = 1.0  # everything predicted as class 0
    trial = TrialBuilder(tmp_path).add(0, "labels", labels).add(0, "predictions", scores)
    trial_read = trial.write()
    assert fired_steps(ClassImbalance(trial_read)) == []
    rule = ClassImbalance(trial_read, argmax=True)
    assert fired_steps(rule) == [0]
    assert "class 1: 300 of its 300" in evidence_of(rule)[0].message


def test_confusion_old_vectors(tmp_path: Path) -> None:
    # 1: predictions equal to the labels, found through collections: no firing.
    y = np.random.default_rng(0).integers(10, size=100)
    trial = (
        TrialBuilder(tmp_path / "1")
        .add(0, "y", y)
        .add(0, "y_hat", y)
        .collection("labels", names=["y"])
        .collection("preds", names=["y_hat"])
        .write()
    )
    assert (
        fired_steps(Confusion(trial, labels_collection="labels", predictions_collection="preds"))
        == []
    )
    # 2 and 3: one of ten samples mislabeled; by the default thresholds, and by max_off_diag.
    y = np.arange(10)
    y_hat = y.copy()
    y_hat[4] = 7
    trial = TrialBuilder(tmp_path / "2").add(1, "foo", y).add(1, "bar", y_hat).write()
    assert fired_steps(Confusion(trial, 10, "foo", "bar")) == [1]
    assert fired_steps(Confusion(trial, 10, "foo", "bar", min_diag=0.0, max_off_diag=0.01)) == [1]
    # 4: the default tensor names, everything right.
    y = np.arange(10)
    trial = TrialBuilder(tmp_path / "4").add(1, "labels", y).add(1, "predictions", y).write()
    assert fired_steps(Confusion(trial)) == []


def test_confusion_min_diag_boundary(tmp_path: Path) -> None:
    labels = _labels(10, 90)
    right_9 = labels.copy()
    right_9[9] = 1  # class 0: 9 of 10 right (0.9)
    right_8 = labels.copy()
    right_8[8:10] = 1  # class 0: 8 of 10 right
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "labels", labels)
        .add(0, "predictions", right_9)
        .add(1, "labels", labels)
        .add(1, "predictions", right_8)
        .write()
    )
    rule = Confusion(trial)
    assert fired_steps(rule) == [1]
    (evidence,) = evidence_of(rule)
    assert evidence.value == pytest.approx(0.8)
    assert "class 0: 8 of its 10 samples were predicted as 0" in evidence.message


def test_confusion_max_off_diag_boundary(tmp_path: Path) -> None:
    labels = _labels(90, 100)
    ten_wrong = labels.copy()
    ten_wrong[90:100] = 0  # column 0: 90 of class 0 and 10 of class 1, a share of 0.1
    eleven_wrong = labels.copy()
    eleven_wrong[90:101] = 0  # 11 of 101
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "labels", labels)
        .add(0, "predictions", ten_wrong)
        .add(1, "labels", labels)
        .add(1, "predictions", eleven_wrong)
        .write()
    )
    rule = Confusion(trial, min_diag=0.8)
    assert fired_steps(rule) == [1]
    assert (
        "11 of the 101 samples predicted as class 0 are of class 1" in evidence_of(rule)[0].message
    )


def test_confusion_takes_argmax_of_score_rows(tmp_path: Path) -> None:
    labels = np.array([0, 1, 2, 2])
    scores = np.eye(3)[[0, 1, 2, 1]]  # the last sample predicted as 1
    trial = TrialBuilder(tmp_path).add(0, "labels", labels).add(0, "predictions", scores).write()
    rule = Confusion(trial)
    assert fired_steps(rule) == [0]
    messages = [item.message for item in evidence_of(rule)]
    assert any("class 2: 1 of its 2 samples" in message for message in messages)
