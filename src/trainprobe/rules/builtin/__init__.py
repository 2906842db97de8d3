"""The 20 built-in debugging rules of SageMaker Debugger, CreateXgboostReport, and trainprobe's
own: the in-training rules LossSpike and GradientNormSpike, and ReplicaDivergence, on the trial
API.

``BUILTIN_RULES`` maps each rule's catalogue name to its class; the engine looks rules up
there. Every constructor takes the trial, then the catalogue's parameters with the catalogue's
defaults (as Python values or as the strings of ``RuleParameters``), then ``other_trials`` and
``action_str`` by keyword::

    from trainprobe.rules.builtin import BUILTIN_RULES, VanishingGradient

    rule = VanishingGradient(trial, threshold=1e-7)
    rule = BUILTIN_RULES["VanishingGradient"](trial, threshold="1e-7")

CreateXgboostReport never fires: the job runner writes its report (``trainprobe.report.xgboost``).
"""

from __future__ import annotations

from trainprobe.rules.builtin.activations import DeadRelu, SaturatedActivation
from trainprobe.rules.builtin.base import BuiltinRule
from trainprobe.rules.builtin.gradients import (
    PoorWeightInitialization,
    VanishingGradient,
    WeightUpdateRatio,
)
from trainprobe.rules.builtin.inputs import CheckInputImages, NLPSequenceRatio
from trainprobe.rules.builtin.losses import LossNotDecreasing, Overfit, Overtraining
from trainprobe.rules.builtin.predictions import ClassImbalance, Confusion
from trainprobe.rules.builtin.replicas import ReplicaDivergence
from trainprobe.rules.builtin.similar_across_runs import SimilarAcrossRuns
from trainprobe.rules.builtin.spikes import GradientNormSpike, LossSpike
from trainprobe.rules.builtin.stalled_training import StalledTrainingRule
from trainprobe.rules.builtin.tensors import (
    AllZero,
    ExplodingTensor,
    TensorVariance,
    UnchangedTensor,
)
from trainprobe.rules.builtin.xgboost import (
    CreateXgboostReport,
    FeatureImportanceOverweight,
    TreeDepth,
)

__all__ = [
    "BUILTIN_RULES",
    "AllZero",
    "BuiltinRule",
    "CheckInputImages",
    "ClassImbalance",
    "Confusion",
    "CreateXgboostReport",
    "DeadRelu",
    "ExplodingTensor",
    "FeatureImportanceOverweight",
    "GradientNormSpike",
    "LossNotDecreasing",
    "LossSpike",
    "NLPSequenceRatio",
    "Overfit",
    "Overtraining",
    "PoorWeightInitialization",
    "ReplicaDivergence",
    "SaturatedActivation",
    "SimilarAcrossRuns",
    "StalledTrainingRule",
    "TensorVariance",
    "TreeDepth",
    "UnchangedTensor",
    "VanishingGradient",
    "WeightUpdateRatio",
]

BUILTIN_RULES: dict[str, type[BuiltinRule]] = {
    rule.__name__: rule
    for rule in (
        DeadRelu,
        ExplodingTensor,
        PoorWeightInitialization,
        SaturatedActivation,
        VanishingGradient,
        WeightUpdateRatio,
        AllZero,
        ClassImbalance,
        LossNotDecreasing,
        Overfit,
        Overtraining,
        SimilarAcrossRuns,
        StalledTrainingRule,
        TensorVariance,
        UnchangedTensor,
        CheckInputImages,
        NLPSequenceRatio,
        Confusion,
        FeatureImportanceOverweight,
        TreeDepth,
        CreateXgboostReport,
        LossSpike,
        GradientNormSpike,
        ReplicaDivergence,
    )
}
"""Each built-in debugging rule's class, by its catalogue name (the spec's order, then
trainprobe's)."""
