"""rule_configs: base configurations and profiler rule classes, built from the catalogue.

What the SageMaker SDK's rule_configs returns for the same calls is compared in test_rules.py
(one SDK subprocess for every comparison); here are the checks trainprobe adds.
"""

from __future__ import annotations

import inspect

import pytest

from trainprobe.config import actions, catalogue, rule_configs
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.rules import ProfilerRule


@pytest.mark.parametrize("spec", catalogue.debugging_rules(), ids=lambda spec: spec.sdk_name)
def test_each_debugging_rule_has_its_function(spec: catalogue.RuleSpec) -> None:
    config = getattr(rule_configs, spec.sdk_name)()
    rule = config["DebugRuleConfiguration"]
    assert rule == {
        "RuleConfigurationName": spec.name,
        "RuleParameters": {"rule_to_invoke": spec.name},
    }
    collections = config.get("CollectionConfigurations", [])
    assert [c["CollectionName"] for c in collections] == [need.name for need in spec.collections]


def test_each_call_returns_a_fresh_configuration() -> None:
    first = rule_configs.vanishing_gradient()
    first["CollectionConfigurations"][0]["CollectionParameters"]["save_interval"] = "1"
    first["DebugRuleConfiguration"]["RuleParameters"]["threshold"] = "1"
    second = rule_configs.vanishing_gradient()
    assert second["CollectionConfigurations"][0]["CollectionParameters"] == {"save_interval": "500"}
    assert second["DebugRuleConfiguration"]["RuleParameters"] == {
        "rule_to_invoke": "VanishingGradient"
    }


@pytest.mark.parametrize("spec", catalogue.profiler_rules()[:-1], ids=lambda spec: spec.sdk_name)
def test_each_profiler_rule_has_its_class(spec: catalogue.RuleSpec) -> None:
    config = getattr(rule_configs, spec.sdk_name)()
    assert config.rule_name == spec.name
    sent = {p.name: p.default for p in spec.parameters if p.in_rulesconfig}
    assert config.rule_parameters == {**sent, "rule_to_invoke": spec.name}
    signature = inspect.signature(type(config))
    assert list(signature.parameters) == list(sent)
    assert [p.default for p in signature.parameters.values()] == list(sent.values())


def test_profiler_arguments_are_kept_as_given() -> None:
    config = rule_configs.CPUBottleneck(30, cpu_threshold="95", patience=10)
    assert config.rule_parameters == {
        "threshold": 30,
        "gpu_threshold": 10,
        "cpu_threshold": "95",
        "patience": 10,
        "scan_interval_us": 60_000_000,
        "rule_to_invoke": "CPUBottleneck",
    }
    request = ProfilerRule.sagemaker(config).to_profiler_rule_config_dict()
    assert request["RuleParameters"]["cpu_threshold"] == "95"
    assert request["RuleParameters"]["threshold"] == "30"


def test_parameters_outside_rulesconfig_are_sent_only_when_given() -> None:
    assert "patience" not in rule_configs.Dataloader().rule_parameters
    assert rule_configs.Dataloader(patience=5).rule_parameters["patience"] == 5
    assert rule_configs.OverallFrameworkMetrics().rule_parameters == {
        "rule_to_invoke": "OverallFrameworkMetrics"
    }


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: rule_configs.CPUBottleneck(threshold=101), "CPUBottleneck.threshold"),
        (lambda: rule_configs.CPUBottleneck(cpu_threshold="high"), "CPUBottleneck.cpu_threshold"),
        (lambda: rule_configs.BatchSize(window=0), "BatchSize.window"),
        (lambda: rule_configs.BatchSize(patience=1.5), "BatchSize.patience"),
        (lambda: rule_configs.StepOutlier(mode="train"), "StepOutlier.mode"),
        (lambda: rule_configs.StepOutlier(stddev=-1), "StepOutlier.stddev"),
        (lambda: rule_configs.LoadBalancing(treshold=0.2), "LoadBalancing.treshold"),
        (
            lambda: rule_configs.MaxInitializationTime(threshold=0),
            "MaxInitializationTime.threshold",
        ),
    ],
)
def test_bad_profiler_arguments_name_the_class_and_parameter(build: object, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build()  # type: ignore[operator]
    assert caught.value.field == field


def test_a_misspelt_profiler_argument_gets_a_suggestion() -> None:
    with pytest.raises(ConfigError) as caught:
        rule_configs.LowGPUUtilization(threshold_p96=80)
    assert caught.value.suggestion == "threshold_p95"


def test_every_bad_profiler_argument_is_reported() -> None:
    with pytest.raises(ConfigErrors) as caught:
        rule_configs.IOBottleneck(threshold=-1, io_threshold=200)
    assert [error.field for error in caught.value] == [
        "IOBottleneck.threshold",
        "IOBottleneck.io_threshold",
    ]


def test_positional_arguments_follow_the_sdk_signature() -> None:
    assert rule_configs.GPUMemoryIncrease(7, 100).rule_parameters["patience"] == 100
    with pytest.raises(TypeError):
        rule_configs.MaxInitializationTime(1, 2, 3)
    with pytest.raises(TypeError):
        rule_configs.MaxInitializationTime(5, threshold=6)


def test_profiler_report_normalises_rule_names_and_checks_values() -> None:
    report = rule_configs.ProfilerReport(
        cpubottleneck_cpu_threshold=90, OverallFrameworkMetrics_scan_interval_us=1000
    )
    assert report.rule_parameters == {
        "CPUBottleneck_cpu_threshold": 90,
        "OverallFrameworkMetrics_scan_interval_us": 1000,
        "rule_to_invoke": "ProfilerReport",
    }
    assert rule_configs.ProfilerReport().rule_parameters == {"rule_to_invoke": "ProfilerReport"}


@pytest.mark.parametrize(
    ("overrides", "suggestion"),
    [
        ({"CPUBottleneck_cpu_threshold": 190}, None),
        ({"CPUBotleneck_cpu_threshold": 90}, "CPUBottleneck_cpu_threshold"),
        ({"StepOutlier_nr_outliers": 3}, "StepOutlier_n_outliers"),
        ({"cpu": 3}, None),
    ],
)
def test_profiler_report_rejects_bad_overrides(
    overrides: dict[str, object], suggestion: str | None
) -> None:
    with pytest.raises(ConfigError) as caught:
        rule_configs.ProfilerReport(**overrides)
    assert caught.value.field == f"ProfilerReport.{next(iter(overrides))}"
    assert caught.value.suggestion == suggestion


def test_get_collection_gives_the_collections_the_rules_read() -> None:
    assert rule_configs.get_collection("weights") == {
        "CollectionName": "weights",
        "CollectionParameters": {"save_interval": "500"},
    }
    # rulesconfig leaves these two unwrapped; trainprobe gives them the same shape as the rest.
    assert rule_configs.get_collection("relu_input")["CollectionName"] == "relu_input"
    with pytest.raises(ConfigError) as caught:
        rule_configs.get_collection("gradient")
    assert caught.value.suggestion == "gradients"


def test_the_actions_are_importable_from_rule_configs() -> None:
    for name in ("ActionList", "StopTraining", "Email", "SMS", "Webhook", "is_valid_action_object"):
        assert getattr(rule_configs, name) is getattr(actions, name)


def test_the_public_names_are_listed() -> None:
    for name in rule_configs.__all__:
        assert hasattr(rule_configs, name)
    for spec in catalogue.all_rules():
        assert spec.sdk_name in rule_configs.__all__
