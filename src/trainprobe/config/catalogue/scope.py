"""What each built-in debugging rule catches, and what it does not, in a user's words.

The rules keep the spec's documented semantics, even where they are narrower than a user would
expect (a noisy, flat loss is not "not decreasing" by LossNotDecreasing's test); ``trainprobe
rules show`` prints these lines so that nobody reads more into a NoIssuesFound than was checked.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RuleScope", "scope_of"]


@dataclass(frozen=True)
class RuleScope:
    """What a rule catches and what it does not."""

    catches: str
    misses: str


_ACTIVATIONS_BY_TYPE = (
    "Activations called as functions (F.relu, torch.tanh) are not modules and are never seen; "
    "the rule then ends in Error saying so."
)

_SCOPES = {
    "LossNotDecreasing": RuleScope(
        "A loss that, every num_steps steps, is no lower (by diff_percent) than num_steps "
        "steps before, or that rose by more than increase_threshold_percent.",
        "A noisy loss that is flat on average: the test compares two single steps, so one lucky "
        "dip passes. A loss that falls by just over diff_percent every num_steps, however slowly "
        "that converges. Losses the job does not save (a functional loss never given to the "
        "hook).",
    ),
    "Overfit": RuleScope(
        "A validation loss above the training loss by more than ratio_threshold, patience "
        "evaluations in a row.",
        "Overfitting that shows in metrics but not in the loss; jobs that save no EVAL steps.",
    ),
    "Overtraining": RuleScope(
        "A training or validation loss with no new best (by delta) for patience saved steps.",
        "A loss that still improves by tiny amounts above delta; the steps between saves.",
    ),
    "ExplodingTensor": RuleScope(
        "A NaN or infinity in any saved tensor of the saved steps, and (with the PyTorch hook's "
        "non-finite guard, on by default) the step and the layer where the first one started, "
        "whether or not that step was due to be saved.",
        "Values that are huge but finite; NaNs in tensors the hook never sees (functional "
        "operations inside a module are covered only through that module's output).",
    ),
    "DeadRelu": RuleScope(
        "ReLU layers most of whose units output 0 for almost every sample: tensors named like "
        "relu_output and, with the default tensor_regex, the outputs of every nn.ReLU module.",
        "LeakyReLU, GELU and other activations; units that die between saved steps. "
        + _ACTIVATIONS_BY_TYPE,
    ),
    "SaturatedActivation": RuleScope(
        "tanh and sigmoid layers whose inputs lie where the gradient vanishes for almost every "
        "sample: inputs of nn.Tanh / nn.Sigmoid modules (told apart by type) or tensors named "
        "tanh_input / sigmoid_input.",
        "Other saturating functions (Hardtanh, Softsign); saturation in some samples only. "
        + _ACTIVATIONS_BY_TYPE,
    ),
    "PoorWeightInitialization": RuleScope(
        "In the first steps: activation inputs whose variances differ across layers by more "
        "than threshold, gradients spread too narrowly, or a loss that stops improving.",
        "Poor initialization that shows after the first steps. When no activation input is "
        "saved, only the gradient and loss checks run, and the status says the variance check "
        "matched nothing. " + _ACTIVATIONS_BY_TYPE,
    ),
    "VanishingGradient": RuleScope(
        "A gradient whose mean absolute value is below threshold at a saved step.",
        "Gradients that vanish only for some elements while others stay large.",
    ),
    "WeightUpdateRatio": RuleScope(
        "A weight whose update between two saved steps is too large or too small relative to "
        "the weight.",
        "Updates between saved steps that cancel out; weights saved at a single step.",
    ),
    "AllZero": RuleScope(
        "A tensor with at least threshold percent zeros at a saved step.",
        "Tensors that are constant but not zero.",
    ),
    "TensorVariance": RuleScope(
        "A tensor whose variance at a saved step is above max_threshold or below min_threshold.",
        "Changes of variance within the thresholds, however sudden.",
    ),
    "UnchangedTensor": RuleScope(
        "A tensor equal (numpy.allclose) over its last num_steps saved steps.",
        "Tensors that change by less than the tolerance but not by nothing.",
    ),
    "ClassImbalance": RuleScope(
        "A class with more than threshold_imbalance times the samples of another, or a class "
        "mostly mispredicted, counted over the saved labels and predictions.",
        "Imbalance in the data the job does not save (labels outside the saved steps).",
    ),
    "Confusion": RuleScope(
        "A confusion matrix too far from diagonal at a saved step.",
        "Confusion between classes absent from the saved steps.",
    ),
    "CheckInputImages": RuleScope(
        "Input images whose per-channel mean is far from 0 (not normalized).",
        "Images with a wrong scale but a mean near 0.",
    ),
    "NLPSequenceRatio": RuleScope(
        "Input sequences with too many padding or unknown tokens.",
        "Tokens other than those listed in token_values.",
    ),
    "SimilarAcrossRuns": RuleScope(
        "A tensor that differs from another run's at the same step.",
        "Differences below numpy.allclose's tolerance.",
    ),
    "FeatureImportanceOverweight": RuleScope(
        "An XGBoost model whose nfeatures most important features hold more than threshold of "
        "the total importance.",
        "Models with no more than nfeatures features (never judged); importance types the job "
        "does not save.",
    ),
    "TreeDepth": RuleScope(
        "Trees deeper than depth.",
        "Trees that are shallow but too many, or overfit in other ways.",
    ),
    "StalledTrainingRule": RuleScope(
        "No new step written for threshold seconds.",
        "A training that runs but makes no progress (it checks that steps are written, not "
        "what they hold).",
    ),
}


def scope_of(rule: str) -> RuleScope | None:
    """What ``rule`` catches and does not; None for rules without such a note."""
    return _SCOPES.get(rule)
