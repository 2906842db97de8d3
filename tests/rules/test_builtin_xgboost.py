"""FeatureImportanceOverweight and TreeDepth on hand-made trials shaped like smdebug's XGBoost
output (``feature_importance/<type>/<feature>`` scalars, ``trees/<column>`` vectors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from builtin_trials import TrialBuilder, evidence_of, fired_steps

from trainprobe.rules.builtin import FeatureImportanceOverweight, TreeDepth
from trainprobe.rules.builtin.xgboost import tree_depth


def _importances(builder: TrialBuilder, step: int, values: list[float], kind: str = "weight"):
    for index, value in enumerate(values):
        builder.add(step, f"feature_importance/{kind}/f{index}", np.float64(value))
    return builder


def test_feature_importance_overweight_threshold_boundary(tmp_path: Path) -> None:
    builder = TrialBuilder(tmp_path)
    _importances(builder, 0, [0.5, 0.2, 0.11, 0.1, 0.09])  # top 3: 0.81
    _importances(builder, 1, [40, 20, 20, 10, 10])  # top 3: exactly 0.8
    _importances(builder, 2, [50, 20, 11, 10, 9])  # counts: normalized, 0.81
    _importances(builder, 3, [0.9, 0.05, 0.05, 0.0, 0.0], kind="gain")
    trial = builder.write()
    rule = FeatureImportanceOverweight(trial)
    assert fired_steps(rule) == [0, 2]
    evidence = evidence_of(rule)
    assert evidence[0].value == pytest.approx(0.81)
    assert "(feature_importance/weight/f0, feature_importance/weight/f1, " in evidence[0].message
    assert fired_steps(FeatureImportanceOverweight(trial, nfeatures=2, threshold=0.65)) == [0, 2]
    gain = FeatureImportanceOverweight(trial, tensor_regex=".*feature_importance/gain")
    assert fired_steps(gain) == [3]


def test_feature_importance_overweight_does_not_judge_too_few_features(tmp_path: Path) -> None:
    trial = _importances(TrialBuilder(tmp_path), 0, [0.9, 0.1, 0.0]).write()
    assert fired_steps(FeatureImportanceOverweight(trial)) == []


def _complete_tree(depth: int) -> np.ndarray:
    """Node numbers of a complete binary tree of ``depth`` levels below the root."""
    return np.arange(2 ** (depth + 1) - 1)


def test_tree_depth_of_complete_trees() -> None:
    assert [tree_depth(int(_complete_tree(d).max())) for d in range(6)] == [0, 1, 2, 3, 4, 5]


def test_tree_depth_fires_on_trees_deeper_than_depth(tmp_path: Path) -> None:
    trial = (
        TrialBuilder(tmp_path)
        .add(0, "trees/Node", np.concatenate([_complete_tree(3), _complete_tree(4)]))
        .add(0, "trees/Tree", np.repeat([0, 1], [15, 31]))
        .add(1, "trees/Node", _complete_tree(5))
        .write()
    )
    rule = TreeDepth(trial)
    assert fired_steps(rule) == [1]
    (evidence,) = evidence_of(rule)
    assert evidence.value == 5
    assert "largest tree node number is 62, a depth of 5" in evidence.message
    assert fired_steps(TreeDepth(trial, depth="5")) == []
    assert fired_steps(TreeDepth(trial, depth=3.5)) == [0, 1]
