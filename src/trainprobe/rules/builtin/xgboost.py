"""Rules for XGBoost models: FeatureImportanceOverweight, TreeDepth and CreateXgboostReport.

They read what smdebug's XGBoost hook saves: ``feature_importance/<type>/<feature>`` (one
scalar per feature) and ``trees/<column>`` (the columns of ``Booster.trees_to_dataframe``, of
which ``trees/Node`` holds each node's number within its tree). Nothing here imports xgboost.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from trainprobe.analysis.trial import Trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.rules.builtin.selection import TensorSelection

__all__ = ["CreateXgboostReport", "FeatureImportanceOverweight", "TreeDepth", "tree_depth"]

NODE_TENSOR = re.compile(r"(^|/)trees/Node$")
"""The tensor of node numbers the XGBoost hook saves from ``trees_to_dataframe``."""


def tree_depth(largest_node_id: int) -> int:
    """The depth of a tree from its largest node number: ``floor(log2(id))``, 0 for a stump.

    A complete tree of depth d numbers its nodes 0 to 2**(d+1) - 2, whose log2 lies in
    [d, d+1): the floor is d.
    """
    return largest_node_id.bit_length() - 1 if largest_node_id >= 1 else 0


class FeatureImportanceOverweight(BuiltinRule):
    """Fires when the ``nfeatures`` most important features hold more than ``threshold`` of the
    total importance.

    At each step the importances of the tensors matching ``tensor_regex`` (one per feature) are
    normalized to sum to 1. A model with no more than ``nfeatures`` features is not judged: its
    top features always hold all the weight.
    """

    def __init__(
        self,
        base_trial: Trial,
        threshold: float | str = 0.8,
        nfeatures: int | str = 3,
        tensor_regex: str = ".*feature_importance/weight",
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "FeatureImportanceOverweight",
            {"threshold": threshold, "nfeatures": nfeatures, "tensor_regex": tensor_regex},
        )
        self.threshold = parameters.real("threshold")
        self.nfeatures = parameters.integer("nfeatures")
        self.tensor_regex = parameters.text("tensor_regex")
        self.selection = TensorSelection(patterns=parameters.patterns("tensor_regex"))

    def invoke_at_step(self, step: int) -> bool:
        """Whether the top ``nfeatures`` importances at ``step`` exceed ``threshold``."""
        importances: dict[str, float] = {}
        for name in self.selection.names(self.base_trial, step):
            value = self.value(name, step)
            if value is None:
                continue
            flat = np.asarray(value, dtype=np.float64).reshape(-1)
            if flat.size == 1:
                importances[name] = float(flat[0])
            else:
                importances.update({f"{name}[{i}]": float(v) for i, v in enumerate(flat)})
        if not importances:
            raise self.insufficient(
                f"no feature importance (names matching {self.tensor_regex}) was saved at step "
                f"{step}: save the feature_importance collection"
            )
        total = sum(importances.values())
        if len(importances) <= self.nfeatures or total <= 0:
            return False
        top = sorted(importances, key=importances.__getitem__, reverse=True)[: self.nfeatures]
        share = sum(importances[name] for name in top) / total
        if share <= self.threshold:
            return False
        self.record(
            message=(
                f"the {self.nfeatures} most important of {len(importances)} features "
                f"({', '.join(top)}) hold {number(share)} of the importance at "
                f"{self.step_words(step)}, "
                f"more than threshold {number(self.threshold)}"
            ),
            step=step,
            value=share,
            threshold=self.threshold,
        )
        return True


class TreeDepth(BuiltinRule):
    """Fires when the model's trees are deeper than ``depth``.

    The depth is read from the largest node number in ``trees/Node`` (see ``tree_depth``).
    """

    def __init__(
        self,
        base_trial: Trial,
        depth: float | str = 4,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters("TreeDepth", {"depth": depth})
        self.depth = parameters.real("depth")

    def invoke_at_step(self, step: int) -> bool:
        """Whether the deepest tree saved at ``step`` is deeper than ``depth``."""
        names = [n for n in self.base_trial.tensor_names(step=step) if NODE_TENSOR.search(n)]
        nodes = [self.value(name, step) for name in names]
        found = [value for value in nodes if value is not None and value.size]
        if not found:
            raise self.insufficient(
                f"no trees/Node tensor was saved at {self.step_words(step)}: save the trees "
                "collection"
            )
        largest = int(max(np.max(value) for value in found))
        deepest = tree_depth(largest)
        if deepest <= self.depth:
            return False
        self.record(
            message=(
                f"the largest tree node number is {largest}, a depth of {deepest} "
                f"(floor of log2) > depth {number(self.depth)} at {self.step_words(step)}"
            ),
            tensor=names[0],
            step=step,
            value=deepest,
            threshold=self.depth,
        )
        return True


class CreateXgboostReport(BuiltinRule):
    """The XGBoost training report's rule: it judges nothing and never fires.

    Its collections (metrics, feature importance, predictions and labels every 5 rounds, the
    hyperparameters at round 0) make the hook save what the report shows; the job runner writes
    the report into this rule's output once the other rules have given their verdicts
    (``trainprobe.report.xgboost``).
    """

    reads_tensors = False  # the report reads them; the rule has nothing to judge

    def __init__(
        self,
        base_trial: Trial,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)

    def invoke_at_step(self, step: int) -> bool:
        """Never an issue: the report is written from the whole job, at its end."""
        return False
