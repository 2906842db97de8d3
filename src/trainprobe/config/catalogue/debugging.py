"""The 20 built-in debugging rules and CreateXgboostReport: parameters, defaults, collections.

Defaults, types and ranges come from the spec's parameter tables ("List of Debugger Built-in
Rules"); where another source disagrees, the parameter records it in ``alternatives``. The
collections are the ones smdebug-rulesconfig attaches to each rule's base configuration. Ranges
marked "trainprobe" in ``notes`` are not in the spec: they reject values that cannot mean anything
(a negative count, a percentage over 100).
"""

from __future__ import annotations

from trainprobe.config.catalogue.model import (
    FRAMEWORKS,
    AlternativeDefault,
    CollectionNeed,
    Parameter,
    ParamType,
    RuleSpec,
)

__all__ = ["DEBUGGING_RULES", "GROUP_FRAMEWORKS"]

GROUP_FRAMEWORKS = {
    "UNIVERSAL": FRAMEWORKS,
    "DEEP_LEARNING": ("pytorch", "tensorflow", "mxnet"),
    "DL_APPLICATION": ("pytorch", "tensorflow", "mxnet"),
    "XGBOOST": ("xgboost",),
}
"""smdebug-rulesconfig's rule groups and the frameworks each applies to."""

_ADDED_RANGE = "range added by trainprobe"


def _percent(name: str, default: float, meaning: str) -> Parameter:
    return Parameter(
        name, ParamType.FLOAT, default, meaning, minimum=0.0, maximum=100.0, notes=_ADDED_RANGE
    )


def _count(name: str, default: int | None, meaning: str, minimum: float = 0.0) -> Parameter:
    return Parameter(name, ParamType.INTEGER, default, meaning, minimum=minimum, notes=_ADDED_RANGE)


def _collection_names() -> Parameter:
    return Parameter(
        "collection_names",
        ParamType.STRING_LIST,
        None,
        "Collections whose tensors the rule inspects.",
    )


def _tensor_regex(default: tuple[str, ...] | None = None) -> Parameter:
    return Parameter(
        "tensor_regex",
        ParamType.STRING_LIST,
        default,
        "Regex patterns selecting the tensors the rule inspects (all tensors when none).",
    )


def _collection(name: str, **parameters: str) -> CollectionNeed:
    return CollectionNeed(name, tuple(parameters.items()))


def _rule(
    name: str,
    sdk_name: str,
    description: str,
    group: str | None,
    *,
    parameters: tuple[Parameter, ...] = (),
    collections: tuple[CollectionNeed, ...] = (),
    one_of: tuple[tuple[str, ...], ...] = (),
    example: tuple[tuple[str, str], ...] = (),
    frameworks: tuple[str, ...] | None = None,
) -> RuleSpec:
    if frameworks is None:
        frameworks = GROUP_FRAMEWORKS[group] if group else ("xgboost",)
    return RuleSpec(
        name=name,
        kind="debugging",
        sdk_name=sdk_name,
        description=description,
        parameters=parameters,
        collections=collections,
        frameworks=frameworks,
        group=group,
        one_of=one_of,
        example=example,
    )


_F = ParamType.FLOAT
_I = ParamType.INTEGER
_B = ParamType.BOOLEAN
_S = ParamType.STRING

DEBUGGING_RULES: tuple[RuleSpec, ...] = (
    _rule(
        "DeadRelu",
        "dead_relu",
        "Fires when too many ReLUs in a layer have stopped activating.",
        "DEEP_LEARNING",
        parameters=(
            _tensor_regex((".*relu_output",)),
            _percent(
                "threshold_inactivity",
                1.0,
                "Percentage of activity below which a ReLU counts as dead.",
            ),
            _percent(
                "threshold_layer",
                50.0,
                "Percentage of dead ReLUs in a layer above which the rule fires.",
            ),
        ),
        collections=(
            _collection("relu_output", include_regex=".*relu_output", save_interval="500"),
        ),
    ),
    _rule(
        "ExplodingTensor",
        "exploding_tensor",
        "Fires when a tensor holds NaN or infinite values.",
        "DEEP_LEARNING",
        parameters=(
            _collection_names(),
            _tensor_regex(),
            Parameter(
                "only_nan",
                _B,
                False,
                "Look for NaN only; when False, infinities count as exploding too.",
            ),
        ),
    ),
    _rule(
        "PoorWeightInitialization",
        "poor_weight_initialization",
        "Fires when the first steps show the weights were badly initialized.",
        "DEEP_LEARNING",
        parameters=(
            Parameter(
                "activation_inputs_regex",
                ParamType.STRING_LIST,
                (".*relu_input",),
                "Regex patterns selecting the activation inputs whose variances are compared.",
            ),
            Parameter(
                "threshold",
                _F,
                10.0,
                "Largest allowed ratio of the maximum to the minimum activation-input variance "
                "across layers at a step.",
            ),
            Parameter(
                "distribution_range",
                _F,
                0.001,
                "Smallest allowed spread between the 5th and 95th gradient percentiles.",
            ),
            _count(
                "patience",
                5,
                "Steps to wait for the loss to decrease before counting it as not decreasing.",
            ),
            Parameter(
                "steps",
                _F,
                10,
                "How many initial steps the rule analyzes.",
                minimum=0.0,
                notes=_ADDED_RANGE,
            ),
        ),
        collections=(_collection("relu_input", include_regex=".*relu_input", save_interval="500"),),
    ),
    _rule(
        "SaturatedActivation",
        "saturated_activation",
        "Fires when too many tanh or sigmoid units in a layer are saturated.",
        "DEEP_LEARNING",
        parameters=(
            _collection_names(),
            Parameter(
                "tensor_regex",
                ParamType.STRING_LIST,
                (".*tanh_input|.*sigmoid_input",),
                "Regex patterns selecting the activation inputs to inspect.",
            ),
            Parameter(
                "threshold_tanh_min", _F, -9.4999, "Lower tanh input bound counted as saturated."
            ),
            Parameter(
                "threshold_tanh_max", _F, 9.4999, "Upper tanh input bound counted as saturated."
            ),
            Parameter(
                "threshold_sigmoid_min", _F, -23, "Lower sigmoid input bound counted as saturated."
            ),
            Parameter(
                "threshold_sigmoid_max",
                _F,
                16.99999,
                "Upper sigmoid input bound counted as saturated.",
            ),
            _percent(
                "threshold_inactivity",
                1.0,
                "Percentage of activity below which a unit counts as saturated.",
            ),
            _percent(
                "threshold_layer",
                50.0,
                "Percentage of saturated units in a layer above which the rule fires.",
            ),
        ),
    ),
    _rule(
        "VanishingGradient",
        "vanishing_gradient",
        "Fires when the mean absolute gradient falls below a threshold.",
        "DEEP_LEARNING",
        parameters=(
            Parameter(
                "threshold",
                _F,
                0.0000001,
                "Mean absolute gradient value below which gradients count as vanishing.",
            ),
        ),
        collections=(_collection("gradients", save_interval="500"),),
    ),
    _rule(
        "WeightUpdateRatio",
        "weight_update_ratio",
        "Fires when the ratio of weight updates to weights is too large or too small.",
        "DEEP_LEARNING",
        parameters=(
            _count(
                "num_steps",
                None,
                "Compare the weights at step s with a step >= s - num_steps; when unset, with the "
                "previous saved step.",
                minimum=1.0,
            ),
            Parameter(
                "large_threshold", _F, 10.0, "Update-to-weight ratio above which the rule fires."
            ),
            Parameter(
                "small_threshold",
                _F,
                0.00000001,
                "Update-to-weight ratio below which the rule fires.",
            ),
            Parameter(
                "epsilon",
                _F,
                0.000000001,
                "Small constant added to the denominator to avoid dividing by zero.",
            ),
        ),
        collections=(_collection("weights", save_interval="500"),),
    ),
    _rule(
        "AllZero",
        "all_zero",
        "Fires when all (or a given percentage) of a tensor's values are zero.",
        "UNIVERSAL",
        parameters=(
            _collection_names(),
            _tensor_regex(),
            _percent(
                "threshold",
                100,
                "Percentage of zero values in a tensor at which the rule fires.",
            ),
        ),
        one_of=(("collection_names", "tensor_regex"),),
        example=(("tensor_regex", ".*"),),
    ),
    _rule(
        "ClassImbalance",
        "class_imbalance",
        "Fires on a large imbalance between classes, or many mispredictions in one class.",
        "UNIVERSAL",
        parameters=(
            Parameter(
                "threshold_imbalance",
                _F,
                10,
                "Largest allowed ratio between the sample counts of the largest and the "
                "smallest class.",
            ),
            Parameter(
                "threshold_misprediction",
                _F,
                0.7,
                "Largest allowed fraction of mispredictions for any class.",
                minimum=0.0,
                maximum=1.0,
                notes=_ADDED_RANGE,
            ),
            _count(
                "samples",
                500,
                "Labels to see before the imbalance is evaluated.",
            ),
            Parameter(
                "argmax",
                _B,
                False,
                "Apply argmax to the predictions (needed when they are class probabilities).",
            ),
            Parameter("labels_regex", _S, ".*labels", "Name pattern of the labels tensor."),
            Parameter(
                "predictions_regex", _S, ".*predictions", "Name pattern of the predictions tensor."
            ),
        ),
    ),
    _rule(
        "LossNotDecreasing",
        "loss_not_decreasing",
        "Fires when the loss stops decreasing at an adequate rate.",
        "UNIVERSAL",
        parameters=(
            _collection_names(),
            _tensor_regex(),
            Parameter(
                "use_losses_collection",
                _B,
                True,
                'Also inspect the "losses" collection when it exists.',
            ),
            _count(
                "num_steps",
                10,
                "Minimum distance in steps between the two losses compared; the rule evaluates "
                "every num_steps.",
                minimum=1.0,
            ),
            Parameter(
                "diff_percent",
                _F,
                0.1,
                "Minimum percentage by which the loss must decrease over num_steps.",
                minimum=0.0,
                maximum=100.0,
                min_exclusive=True,
                max_exclusive=True,
            ),
            Parameter(
                "increase_threshold_percent",
                _F,
                5,
                "Maximum percentage by which the loss may increase.",
                minimum=0.0,
                maximum=100.0,
                min_exclusive=True,
                max_exclusive=True,
            ),
            Parameter(
                "mode",
                _S,
                "GLOBAL",
                "Mode whose loss values are checked.",
                choices=("EVAL", "TRAIN", "GLOBAL"),
                alternatives=(
                    AlternativeDefault(
                        None,
                        "spec description text and smdebug's first-party rule docs: unset, "
                        "trying EVAL, then TRAIN, then GLOBAL",
                    ),
                ),
            ),
        ),
        collections=(_collection("losses", save_interval="500"),),
        one_of=(("collection_names", "tensor_regex", "use_losses_collection"),),
    ),
    _rule(
        "Overfit",
        "overfit",
        "Fires when the validation loss pulls away from the training loss.",
        "UNIVERSAL",
        parameters=(
            _tensor_regex(),
            _count(
                "start_step",
                0,
                "Step from which validation and training losses are compared.",
            ),
            _count(
                "patience",
                1,
                "Steps ratio_threshold may be exceeded before the model counts as overfit.",
            ),
            Parameter(
                "ratio_threshold",
                _F,
                0.1,
                "Largest allowed (mean validation loss - mean training loss) / mean training loss.",
            ),
        ),
    ),
    _rule(
        "Overtraining",
        "overtraining",
        "Fires when training and validation losses stop improving.",
        "UNIVERSAL",
        parameters=(
            _count(
                "patience_train",
                5,
                "Steps without improvement before the training loss counts as not improving.",
            ),
            _count(
                "patience_validation",
                10,
                "Steps without improvement before the validation loss counts as not improving.",
            ),
            Parameter(
                "delta",
                _F,
                0.01,
                "Minimum improvement of the loss that counts as a new optimum.",
            ),
        ),
    ),
    _rule(
        "SimilarAcrossRuns",
        "similar_across_runs",
        "Fires when tensors differ between this job and another trial.",
        "UNIVERSAL",
        parameters=(
            Parameter(
                "other_trial",
                _S,
                None,
                "The finished job (name or output path) to compare with.",
                required=True,
                supplied_by=r"other_trial_\d+",
                notes="other_trials_s3_input_paths (other_trial_<i>) also supplies it",
            ),
            _collection_names(),
            _tensor_regex(),
        ),
        example=(("other_trial", "<other-training-job-or-path>"),),
    ),
    _rule(
        "StalledTrainingRule",
        "stalled_training_rule",
        "Fires when no new tensor has been written for a while; can stop the job.",
        "UNIVERSAL",
        parameters=(
            _count(
                "threshold",
                1800,
                "Seconds without a new tensor after which the rule fires.",
                minimum=1.0,
            ),
            Parameter(
                "stop_training_on_fire",
                _B,
                False,
                "Stop the training job when the rule fires.",
            ),
            Parameter(
                "training_job_name_prefix",
                _S,
                None,
                "Prefix of the job to stop; it must match exactly one running job.",
            ),
        ),
    ),
    _rule(
        "TensorVariance",
        "tensor_variance",
        "Fires when a tensor's variance is above or below a threshold.",
        "DEEP_LEARNING",
        parameters=(
            _collection_names(),
            _tensor_regex(),
            Parameter("max_threshold", _F, None, "Upper bound for the tensor variance."),
            Parameter("min_threshold", _F, None, "Lower bound for the tensor variance."),
        ),
        one_of=(("collection_names", "tensor_regex"), ("max_threshold", "min_threshold")),
        example=(
            ("collection_names", "weights"),
            ("max_threshold", "10"),
            ("min_threshold", "0.00001"),
        ),
        # The spec applies it to XGBoost as well, though rulesconfig's group is DEEP_LEARNING.
        frameworks=FRAMEWORKS,
    ),
    _rule(
        "UnchangedTensor",
        "unchanged_tensor",
        "Fires when a tensor stops changing across steps.",
        "UNIVERSAL",
        parameters=(
            _collection_names(),
            _tensor_regex(),
            _count(
                "num_steps",
                3,
                "How many of the last saved steps are compared (they need not be consecutive).",
                minimum=1.0,
            ),
            Parameter("rtol", _F, 1e-05, "Relative tolerance of the comparison (numpy.allclose)."),
            Parameter("atol", _F, 1e-08, "Absolute tolerance of the comparison (numpy.allclose)."),
            Parameter("equal_nan", _B, False, "Whether NaNs compare as equal."),
        ),
        one_of=(("collection_names", "tensor_regex"),),
        example=(("collection_names", "losses"),),
    ),
    _rule(
        "CheckInputImages",
        "check_input_images",
        "Fires when input images do not look normalized (their mean is far from zero).",
        "DL_APPLICATION",
        parameters=(
            Parameter(
                "threshold_mean",
                _F,
                0.2,
                "How far from 0 the mean of the input data may be.",
            ),
            _count(
                "threshold_samples",
                500,
                "Images to sample before the rule can fire.",
            ),
            Parameter(
                "regex",
                _S,
                ".*hybridsequential0_input_0",
                "Name pattern of the input data tensor.",
            ),
            _count(
                "channel",
                1,
                "Index of the color channel in the input tensor's shape.",
            ),
        ),
        collections=(
            _collection(
                "input_image", include_regex=".*hybridsequential0_input_0", save_interval="500"
            ),
        ),
    ),
    _rule(
        "NLPSequenceRatio",
        "nlp_sequence_ratio",
        "Fires when given tokens (padding, unknown words) make up too much of the input.",
        "DL_APPLICATION",
        parameters=(
            _tensor_regex((".*embedding0_input_0",)),
            Parameter(
                "token_values",
                ParamType.FLOAT_LIST,
                (0,),
                "Token values to count, e.g. 3,0.",
            ),
            Parameter(
                "token_thresholds_percent",
                ParamType.FLOAT_LIST,
                (50,),
                "Threshold percentage for each of token_values.",
                minimum=0.0,
                maximum=100.0,
                notes=_ADDED_RANGE,
            ),
        ),
        collections=(
            _collection(
                "input_sequence", include_regex=".*embedding0_input_0", save_interval="500"
            ),
        ),
    ),
    _rule(
        "Confusion",
        "confusion",
        "Fires when the confusion matrix of a classifier is too far from diagonal.",
        "UNIVERSAL",
        parameters=(
            Parameter(
                "category_no",
                _I,
                None,
                "Number of categories; inferred from the labels when unset.",
                minimum=2.0,
            ),
            Parameter("labels", _S, "labels", "Tensor of true labels."),
            Parameter("predictions", _S, "predictions", "Tensor of predicted labels."),
            Parameter("labels_collection", _S, "labels", "Collection holding the labels."),
            Parameter(
                "predictions_collection", _S, "predictions", "Collection holding the predictions."
            ),
            Parameter(
                "min_diag",
                _F,
                0.9,
                "Minimum ratio of data on the diagonal.",
                minimum=0.0,
                maximum=1.0,
            ),
            Parameter(
                "max_off_diag",
                _F,
                0.1,
                "Maximum ratio of data off the diagonal.",
                minimum=0.0,
                maximum=1.0,
            ),
        ),
    ),
    _rule(
        "FeatureImportanceOverweight",
        "feature_importance_overweight",
        "Fires when the n most important features carry too much of the total importance.",
        "XGBOOST",
        parameters=(
            Parameter(
                "threshold",
                _F,
                0.8,
                "Largest allowed share of the nfeatures largest importances.",
            ),
            _count(
                "nfeatures",
                3,
                "How many of the largest features are summed.",
                minimum=1.0,
            ),
            Parameter(
                "tensor_regex",
                _S,
                ".*feature_importance/weight",
                "Name pattern of the feature importance tensors.",
            ),
        ),
        collections=(_collection("feature_importance", save_interval="500"),),
    ),
    _rule(
        "TreeDepth",
        "tree_depth",
        "Fires when the trees of an XGBoost model grow deeper than a given depth.",
        "XGBOOST",
        parameters=(
            Parameter(
                "depth",
                _F,
                4,
                "Tree depth (log2 of the largest node id) above which the rule fires.",
            ),
        ),
    ),
    _rule(
        "CreateXgboostReport",
        "create_xgboost_report",
        "Writes an XGBoost training report; it never fires.",
        None,
        collections=(
            _collection("metrics", save_interval="5"),
            _collection("feature_importance", save_interval="5"),
            _collection("hyperparameters", save_steps="0"),
            _collection("predictions", save_interval="5"),
            _collection("labels", save_interval="5"),
        ),
    ),
)
