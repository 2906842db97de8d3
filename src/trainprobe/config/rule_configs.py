"""The SDK's ``rule_configs`` module: base configurations for the built-in rules.

One function per debugging rule (``vanishing_gradient()``, ...) returns the same dictionary as
smdebug-rulesconfig's: the rule's name, ``rule_to_invoke`` and the collections it reads. As there,
it carries no parameter defaults; ``Rule.sagemaker`` merges in the user's ``rule_parameters``.

One class per profiler rule (``CPUBottleneck(threshold=50, ...)``) takes the rule's parameters as
arguments, checks them against the catalogue (ConfigError naming the class and parameter), and
exposes ``rule_name`` and ``rule_parameters`` (every default, then ``rule_to_invoke``), as the
SDK's classes do. ``ProfilerReport(CPUBottleneck_cpu_threshold=90)`` takes
``<Rule>_<parameter>`` overrides for the rules it runs. ``OverallFrameworkMetrics`` is a trainprobe
addition (smdebug-rulesconfig has no class for it).

``loss_spike()`` and ``gradient_norm_spike()`` are trainprobe's in-training rules (the hook judges
every step); with them go the actions ``SkipStep()`` and ``Rollback(steps, lr_factor)``.
``replica_divergence()`` is trainprobe's too: data-parallel replicas that drifted apart.

Everything comes from ``trainprobe.config.catalogue``; the actions are importable from here too.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from trainprobe.config import catalogue
from trainprobe.config.actions import (
    SMS,
    ActionList,
    Email,
    ProfileNextSteps,
    Rollback,
    SkipStep,
    StopTraining,
    Webhook,
    is_valid_action_object,
)
from trainprobe.config.catalogue.model import raise_if_any
from trainprobe.config.errors import ConfigError, closest

__all__ = [
    "SMS",
    "ActionList",
    "BatchSize",
    "CPUBottleneck",
    "Dataloader",
    "Email",
    "GPUMemoryIncrease",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "OverallFrameworkMetrics",
    "OverallSystemUsage",
    "ProfileNextSteps",
    "ProfilerReport",
    "ProfilerRuleBase",
    "Rollback",
    "SkipStep",
    "StepOutlier",
    "StopTraining",
    "Webhook",
    "all_zero",
    "check_input_images",
    "class_imbalance",
    "confusion",
    "create_xgboost_report",
    "dead_relu",
    "exploding_tensor",
    "feature_importance_overweight",
    "get_collection",
    "gradient_norm_spike",
    "is_valid_action_object",
    "loss_not_decreasing",
    "loss_spike",
    "nlp_sequence_ratio",
    "overfit",
    "overtraining",
    "poor_weight_initialization",
    "replica_divergence",
    "saturated_activation",
    "similar_across_runs",
    "stalled_training_rule",
    "tensor_variance",
    "tree_depth",
    "unchanged_tensor",
    "vanishing_gradient",
    "weight_update_ratio",
]


def base_config(rule_name: str) -> dict[str, Any]:
    """A built-in debugging rule's base configuration, as its rule_configs function gives it."""
    spec = catalogue.get(rule_name)
    rule = {"RuleConfigurationName": spec.name, "RuleParameters": {"rule_to_invoke": spec.name}}
    config: dict[str, Any] = {"DebugRuleConfiguration": rule}
    if spec.collections:
        config["CollectionConfigurations"] = [need.to_request_dict() for need in spec.collections]
    return config


def vanishing_gradient() -> dict[str, Any]:
    """VanishingGradient, for ``Rule.sagemaker``."""
    return base_config("VanishingGradient")


def similar_across_runs() -> dict[str, Any]:
    """SimilarAcrossRuns, for ``Rule.sagemaker``."""
    return base_config("SimilarAcrossRuns")


def weight_update_ratio() -> dict[str, Any]:
    """WeightUpdateRatio, for ``Rule.sagemaker``."""
    return base_config("WeightUpdateRatio")


def all_zero() -> dict[str, Any]:
    """AllZero, for ``Rule.sagemaker``."""
    return base_config("AllZero")


def exploding_tensor() -> dict[str, Any]:
    """ExplodingTensor, for ``Rule.sagemaker``."""
    return base_config("ExplodingTensor")


def unchanged_tensor() -> dict[str, Any]:
    """UnchangedTensor, for ``Rule.sagemaker``."""
    return base_config("UnchangedTensor")


def loss_not_decreasing() -> dict[str, Any]:
    """LossNotDecreasing, for ``Rule.sagemaker``."""
    return base_config("LossNotDecreasing")


def check_input_images() -> dict[str, Any]:
    """CheckInputImages, for ``Rule.sagemaker``."""
    return base_config("CheckInputImages")


def dead_relu() -> dict[str, Any]:
    """DeadRelu, for ``Rule.sagemaker``."""
    return base_config("DeadRelu")


def confusion() -> dict[str, Any]:
    """Confusion, for ``Rule.sagemaker``."""
    return base_config("Confusion")


def tree_depth() -> dict[str, Any]:
    """TreeDepth, for ``Rule.sagemaker``."""
    return base_config("TreeDepth")


def class_imbalance() -> dict[str, Any]:
    """ClassImbalance, for ``Rule.sagemaker``."""
    return base_config("ClassImbalance")


def overfit() -> dict[str, Any]:
    """Overfit, for ``Rule.sagemaker``."""
    return base_config("Overfit")


def tensor_variance() -> dict[str, Any]:
    """TensorVariance, for ``Rule.sagemaker``."""
    return base_config("TensorVariance")


def overtraining() -> dict[str, Any]:
    """Overtraining, for ``Rule.sagemaker``."""
    return base_config("Overtraining")


def poor_weight_initialization() -> dict[str, Any]:
    """PoorWeightInitialization, for ``Rule.sagemaker``."""
    return base_config("PoorWeightInitialization")


def saturated_activation() -> dict[str, Any]:
    """SaturatedActivation, for ``Rule.sagemaker``."""
    return base_config("SaturatedActivation")


def nlp_sequence_ratio() -> dict[str, Any]:
    """NLPSequenceRatio, for ``Rule.sagemaker``."""
    return base_config("NLPSequenceRatio")


def stalled_training_rule() -> dict[str, Any]:
    """StalledTrainingRule, for ``Rule.sagemaker``."""
    return base_config("StalledTrainingRule")


def feature_importance_overweight() -> dict[str, Any]:
    """FeatureImportanceOverweight, for ``Rule.sagemaker``."""
    return base_config("FeatureImportanceOverweight")


def create_xgboost_report() -> dict[str, Any]:
    """CreateXgboostReport, for ``Rule.sagemaker``."""
    return base_config("CreateXgboostReport")


def loss_spike() -> dict[str, Any]:
    """LossSpike (trainprobe's), for ``Rule.sagemaker``: a step's loss against its recent ones,
    judged inside the training; actions SkipStep, Rollback or StopTraining act before the
    update."""
    return base_config("LossSpike")


def gradient_norm_spike() -> dict[str, Any]:
    """GradientNormSpike (trainprobe's), for ``Rule.sagemaker``: the norm of a step's gradients
    against its recent ones, judged inside the training, as LossSpike."""
    return base_config("GradientNormSpike")


def replica_divergence() -> dict[str, Any]:
    """ReplicaDivergence (trainprobe's), for ``Rule.sagemaker``: the data-parallel replicas of
    each saved parameter compared, step by step, by their fingerprints."""
    return base_config("ReplicaDivergence")


def _known_collections() -> dict[str, catalogue.CollectionNeed]:
    # CreateXgboostReport saves its collections more often than the rules that read them, and
    # the in-training rules save the losses more often than smdebug-rulesconfig does.
    needs = {}
    for spec in catalogue.debugging_rules():
        if spec.name != "CreateXgboostReport" and not spec.in_training:
            needs.update({need.name: need for need in spec.collections})
    return needs


def get_collection(collection_name: str) -> dict[str, Any]:
    """The configuration rulesconfig attaches for a collection the built-in rules read.

    Unlike smdebug-rulesconfig, ``relu_input`` and ``relu_output`` come in the same shape as the
    others (``CollectionName`` and ``CollectionParameters``), and an unknown name raises
    ConfigError instead of returning None.
    """
    needs = _known_collections()
    need = needs.get(collection_name)
    if need is None:
        raise ConfigError(
            "collection_name",
            collection_name,
            f"expected one of {', '.join(needs)}",
            suggestion=closest(str(collection_name), needs),
        )
    return need.to_request_dict()


class ProfilerRuleBase:
    """A built-in profiler rule's configuration, for ``ProfilerRule.sagemaker``.

    Subclasses take the rule's parameters (positionally in smdebug-rulesconfig's order, or by
    name); every value is checked against the catalogue and kept as given.
    """

    rule_name: str
    rule_parameters: dict[str, Any]
    _rule: ClassVar[str] = ""

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._rule = cls.__name__
        if "__init__" in cls.__dict__:
            return
        spec = catalogue.get(cls.__name__)
        cls.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                inspect.Parameter(
                    parameter.name,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=parameter.default,
                )
                for parameter in spec.parameters
                if parameter.in_rulesconfig
            ]
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        spec = catalogue.get(self._rule)
        positional = [parameter.name for parameter in spec.parameters if parameter.in_rulesconfig]
        if len(args) > len(positional):
            raise TypeError(
                f"{self._rule}() takes at most {len(positional)} positional arguments "
                f"({len(args)} given)"
            )
        given = dict(zip(positional, args, strict=False))
        for name, value in kwargs.items():
            if name in given:
                raise TypeError(f"{self._rule}() got multiple values for argument {name!r}")
            given[name] = value
        errors = []
        for name, value in given.items():
            try:
                field = f"{self._rule}.{name}"
                spec.parameter(name, field=field).convert(value, field)
            except ConfigError as error:
                errors.append(error)
        raise_if_any(errors)
        parameters = {name: given.get(name, spec.parameter(name).default) for name in positional}
        parameters.update({name: value for name, value in given.items() if name not in parameters})
        parameters["rule_to_invoke"] = self._rule
        self.rule_name = self._rule
        self.rule_parameters = parameters

    def __repr__(self) -> str:
        shown = {
            key: value for key, value in self.rule_parameters.items() if key != "rule_to_invoke"
        }
        return f"{self.rule_name}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


class BatchSize(ProfilerRuleBase):
    """BatchSize: CPU, GPU and GPU memory all lightly used; the batch may be too small."""


class CPUBottleneck(ProfilerRuleBase):
    """CPUBottleneck: the GPU waits on a busy CPU for too much of the time."""


class Dataloader(ProfilerRuleBase):
    """Dataloader: too few or too many data loader processes for the CPU cores."""


class GPUMemoryIncrease(ProfilerRuleBase):
    """GPUMemoryIncrease: a large increase of GPU memory use."""


class IOBottleneck(ProfilerRuleBase):
    """IOBottleneck: the GPU waits on I/O for too much of the time."""


class LoadBalancing(ProfilerRuleBase):
    """LoadBalancing: work unevenly spread over the GPUs."""


class LowGPUUtilization(ProfilerRuleBase):
    """LowGPUUtilization: a GPU is underused or its utilization fluctuates."""


class MaxInitializationTime(ProfilerRuleBase):
    """MaxInitializationTime: the first step takes too long to arrive."""


class OverallFrameworkMetrics(ProfilerRuleBase):
    """OverallFrameworkMetrics: summary of framework operation times (a trainprobe class)."""


class OverallSystemUsage(ProfilerRuleBase):
    """OverallSystemUsage: summary of system use per node."""


class StepOutlier(ProfilerRuleBase):
    """StepOutlier: too many steps take much longer than the others."""


class ProfilerReport(ProfilerRuleBase):
    """ProfilerReport: runs every profiler rule and writes the profiler report.

    Takes ``<Rule>_<parameter>=value`` for any rule it runs (the rule name in any case, kept in
    the class's spelling: ``cpubottleneck_cpu_threshold`` becomes ``CPUBottleneck_cpu_threshold``),
    checked with that rule's types and ranges.
    """

    def __init__(self, **rule_parameters: Any) -> None:
        spec = catalogue.get("ProfilerReport")
        parameters: dict[str, Any] = {}
        errors = []
        for key, value in rule_parameters.items():
            converted, found = spec.check({key: value}, field_prefix="ProfilerReport")
            errors += found
            parameters.update({name: value for name in converted})
        raise_if_any(errors)
        parameters["rule_to_invoke"] = "ProfilerReport"
        self.rule_name = "ProfilerReport"
        self.rule_parameters = parameters
