"""The rules on real XGBoost trainings saved by trainprobe's hook: each fires on a training that
shows its condition and finds nothing on a healthy twin.

The over-deep model learns breast-cancer data with a third of its labels flipped, with trees up
to 100 levels deep: its training loss falls to 0 while its validation loss climbs. Its healthy
twin has shallow trees, a small learning rate and the true labels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb
from builtin_trials import evidence_of, fired_steps
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.model_selection import train_test_split

import trainprobe.xgboost as smd
from trainprobe.analysis.trial import Trial
from trainprobe.rules.builtin import (
    ClassImbalance,
    Confusion,
    FeatureImportanceOverweight,
    LossNotDecreasing,
    Overfit,
    Overtraining,
    TreeDepth,
)
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

COLLECTIONS = ["metrics", "losses", "predictions", "labels", "feature_importance", "trees"]
OVER_DEEP = {"max_depth": 100, "eta": 0.3, "min_child_weight": 0, "reg_lambda": 0}
HEALTHY = {"max_depth": 2, "eta": 0.1}


def _noisy_labels(labels: np.ndarray) -> np.ndarray:
    flip = np.random.default_rng(1).random(labels.shape[0]) < 0.33
    return np.where(flip, 1 - labels, labels)


def train(
    out: Path,
    features: np.ndarray,
    labels: np.ndarray,
    params: dict[str, object],
    rounds: int = 15,
) -> Trial:
    x_train, x_val, y_train, y_val = train_test_split(features, labels, random_state=0)
    dtrain, dval = xgb.DMatrix(x_train, y_train), xgb.DMatrix(x_val, y_val)
    hook = smd.Hook(
        str(out),
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=COLLECTIONS,
        validation_data=dval,
    )
    chosen = {"objective": "binary:logistic", "eval_metric": "logloss", "nthread": 1, **params}
    xgb.train(
        chosen,
        dtrain,
        rounds,
        evals=[(dtrain, "train"), (dval, "validation")],
        callbacks=[hook],
        verbose_eval=False,
    )
    hook.close()
    return create_trial(str(out))


@pytest.fixture(scope="module")
def over_deep(tmp_path_factory: pytest.TempPathFactory) -> Trial:
    features, labels = load_breast_cancer(return_X_y=True)
    return train(tmp_path_factory.mktemp("deep"), features, _noisy_labels(labels), OVER_DEEP)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Trial:
    features, labels = load_breast_cancer(return_X_y=True)
    return train(tmp_path_factory.mktemp("healthy"), features, labels, HEALTHY)


def test_tree_depth_fires_at_max_depth_100_and_not_at_4(over_deep: Trial, tmp_path: Path) -> None:
    rule = TreeDepth(over_deep)
    assert fired_steps(rule)
    assert all(evidence.value > 4 for evidence in evidence_of(rule))
    features, labels = load_breast_cancer(return_X_y=True)
    shallower = train(tmp_path, features, _noisy_labels(labels), {**OVER_DEEP, "max_depth": 4})
    assert fired_steps(TreeDepth(shallower)) == []


def test_loss_not_decreasing_fires_when_the_validation_loss_rises(
    over_deep: Trial, healthy: Trial
) -> None:
    rule = LossNotDecreasing(over_deep)
    assert fired_steps(rule) == [10]
    (evidence,) = evidence_of(rule)
    assert evidence.tensor == "validation-logloss"
    assert fired_steps(LossNotDecreasing(healthy)) == []


def test_overfit_compares_the_validation_set_with_the_training_set(
    over_deep: Trial, healthy: Trial
) -> None:
    rule = Overfit(over_deep)
    assert fired_steps(rule) == over_deep.steps()
    first = evidence_of(rule)[0]
    assert first.tensor == "validation-logloss"
    assert "train-logloss" in first.message
    assert fired_steps(Overfit(healthy)) == []


def test_overtraining_follows_the_validation_loss(over_deep: Trial, healthy: Trial) -> None:
    rule = Overtraining(over_deep, patience_validation=5)
    assert fired_steps(rule)
    assert {evidence.tensor for evidence in evidence_of(rule)} == {"validation-logloss"}
    assert fired_steps(Overtraining(healthy, patience_validation=5)) == []


def test_feature_importance_overweight_when_one_feature_decides(
    healthy: Trial, tmp_path: Path
) -> None:
    features = np.random.default_rng(0).normal(size=(400, 8))
    decided = train(tmp_path, features, (features[:, 0] > 0).astype(float), {"max_depth": 3})
    rule = FeatureImportanceOverweight(decided)
    assert fired_steps(rule) == decided.steps()
    assert "feature_importance/weight/f0" in evidence_of(rule)[-1].message
    # A first tree splits on a few features whatever the data: judged from round 5 on, as a
    # job's rule with start_step=5 is.
    assert [s for s in fired_steps(FeatureImportanceOverweight(healthy)) if s >= 5] == []


def test_class_imbalance_fires_on_a_rare_class(healthy: Trial, tmp_path: Path) -> None:
    # About one sample in 28 is of class 1: more than the default ratio of 10.
    features = np.random.default_rng(2).normal(size=(600, 8))
    rare = train(tmp_path, features, (features[:, 0] > 1.8).astype(float), {"max_depth": 3})
    rule = ClassImbalance(rare)
    assert fired_steps(rule)
    assert "class 0 has" in evidence_of(rule)[0].message
    assert fired_steps(ClassImbalance(healthy)) == []


def _wine(out: Path, shuffle_labels: bool) -> Trial:
    """An XGBClassifier on the wine data with the hook by hand; with ``shuffle_labels`` it
    learns from labels shuffled at random, so its predictions on the validation set are a guess."""
    features, labels = load_wine(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(features, labels, random_state=0)
    if shuffle_labels:
        y_train = np.random.default_rng(3).permutation(y_train)
    hook = smd.Hook(
        str(out),
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["predictions", "labels"],
        validation_data=xgb.DMatrix(x_val, y_val),
    )
    xgb.XGBClassifier(n_estimators=15, max_depth=2, nthread=1, callbacks=[hook]).fit(
        x_train, y_train
    )
    hook.close()
    return create_trial(str(out))


def test_confusion_and_class_imbalance_read_probabilities(
    over_deep: Trial, healthy: Trial, tmp_path: Path
) -> None:
    # Binary probabilities are class 1 above 0.5.
    # (Its first rounds, near the base score, predict mostly one class.)
    assert max(fired_steps(Confusion(healthy, min_diag=0.8)), default=-1) < 5
    assert fired_steps(Confusion(over_deep, min_diag=0.8)) != []
    # Multi-class probabilities: one row per sample, reduced by argmax.
    wine = _wine(tmp_path / "wine", shuffle_labels=False)
    assert wine.tensor("predictions").value(14).shape == (len(wine.tensor("labels").value(14)), 3)
    assert fired_steps(Confusion(wine, min_diag=0.8, max_off_diag=0.2)) == []
    guessed = _wine(tmp_path / "guessed", shuffle_labels=True)
    assert 14 in fired_steps(Confusion(guessed, min_diag=0.8, max_off_diag=0.2))
    imbalance = ClassImbalance(wine, argmax=True, samples=100, threshold_misprediction=0.2)
    assert fired_steps(imbalance) == []
    mispredicted = ClassImbalance(guessed, argmax=True, samples=100, threshold_misprediction=0.2)
    assert fired_steps(mispredicted) != []
    assert "were mispredicted" in evidence_of(mispredicted)[0].message
