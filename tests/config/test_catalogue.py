"""The catalogue of built-in rules: every rule, every default, every check.

The expected defaults below are transcribed from the spec's parameter tables ("List of Debugger
Built-in Rules", spec file 003) and, for the profiler rules, from smdebug-rulesconfig's classes
(reference §6); ``test_defaults_match_the_spec_file`` also parses them out of the spec text when
the spec is at hand. The SageMaker SDK comparison is in test_rules.py.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from trainprobe.config import catalogue
from trainprobe.config.catalogue import ParamType
from trainprobe.config.errors import ConfigError, ConfigErrors

NONE = None
SPEC_DEFAULTS: dict[str, dict[str, str | None]] = {
    "DeadRelu": {
        "tensor_regex": ".*relu_output",
        "threshold_inactivity": "1.0",
        "threshold_layer": "50.0",
    },
    "ExplodingTensor": {"collection_names": NONE, "tensor_regex": NONE, "only_nan": "False"},
    "PoorWeightInitialization": {
        "activation_inputs_regex": ".*relu_input",
        "threshold": "10.0",
        "distribution_range": "0.001",
        "patience": "5",
        "steps": "10",
    },
    "SaturatedActivation": {
        "collection_names": NONE,
        "tensor_regex": ".*tanh_input|.*sigmoid_input",
        "threshold_tanh_min": "-9.4999",
        "threshold_tanh_max": "9.4999",
        "threshold_sigmoid_min": "-23",
        "threshold_sigmoid_max": "16.99999",
        "threshold_inactivity": "1.0",
        "threshold_layer": "50.0",
    },
    "VanishingGradient": {"threshold": "0.0000001"},
    "WeightUpdateRatio": {
        "num_steps": NONE,
        "large_threshold": "10.0",
        "small_threshold": "0.00000001",
        "epsilon": "0.000000001",
    },
    "AllZero": {"collection_names": NONE, "tensor_regex": NONE, "threshold": "100"},
    "ClassImbalance": {
        "threshold_imbalance": "10",
        "threshold_misprediction": "0.7",
        "samples": "500",
        "argmax": "False",
        "labels_regex": ".*labels",
        "predictions_regex": ".*predictions",
    },
    "LossNotDecreasing": {
        "collection_names": NONE,
        "tensor_regex": NONE,
        "use_losses_collection": "True",
        "num_steps": "10",
        "diff_percent": "0.1",
        "increase_threshold_percent": "5",
        "mode": "GLOBAL",
    },
    "Overfit": {"tensor_regex": NONE, "start_step": "0", "patience": "1", "ratio_threshold": "0.1"},
    "Overtraining": {"patience_train": "5", "patience_validation": "10", "delta": "0.01"},
    "SimilarAcrossRuns": {"other_trial": NONE, "collection_names": NONE, "tensor_regex": NONE},
    "StalledTrainingRule": {
        "threshold": "1800",
        "stop_training_on_fire": "False",
        "training_job_name_prefix": NONE,
    },
    "TensorVariance": {
        "collection_names": NONE,
        "tensor_regex": NONE,
        "max_threshold": NONE,
        "min_threshold": NONE,
    },
    "UnchangedTensor": {
        "collection_names": NONE,
        "tensor_regex": NONE,
        "num_steps": "3",
        "rtol": "1e-05",
        "atol": "1e-08",
        "equal_nan": "False",
    },
    "CheckInputImages": {
        "threshold_mean": "0.2",
        "threshold_samples": "500",
        "regex": ".*hybridsequential0_input_0",
        "channel": "1",
    },
    "NLPSequenceRatio": {
        "tensor_regex": ".*embedding0_input_0",
        "token_values": "0",
        "token_thresholds_percent": "50",
    },
    "Confusion": {
        "category_no": NONE,
        "labels": "labels",
        "predictions": "predictions",
        "labels_collection": "labels",
        "predictions_collection": "predictions",
        "min_diag": "0.9",
        "max_off_diag": "0.1",
    },
    "FeatureImportanceOverweight": {
        "threshold": "0.8",
        "nfeatures": "3",
        "tensor_regex": ".*feature_importance/weight",
    },
    "TreeDepth": {"depth": "4"},
}

# smdebug-rulesconfig's class signatures (reference §6), which the SDK sends.
SCAN = 60_000_000
PROFILER_DEFAULTS: dict[str, dict[str, object]] = {
    "BatchSize": {
        "cpu_threshold_p95": 70,
        "gpu_threshold_p95": 70,
        "gpu_memory_threshold_p95": 70,
        "patience": 1000,
        "window": 500,
        "scan_interval_us": SCAN,
    },
    "CPUBottleneck": {
        "threshold": 50,
        "gpu_threshold": 10,
        "cpu_threshold": 90,
        "patience": 1000,
        "scan_interval_us": SCAN,
    },
    "Dataloader": {"min_threshold": 70, "max_threshold": 200, "scan_interval_us": SCAN},
    "GPUMemoryIncrease": {"increase": 5, "patience": 1000, "window": 10, "scan_interval_us": SCAN},
    "IOBottleneck": {
        "threshold": 50,
        "gpu_threshold": 10,
        "io_threshold": 50,
        "patience": 1000,
        "scan_interval_us": SCAN,
    },
    "LoadBalancing": {"threshold": 0.5, "patience": 1000, "scan_interval_us": SCAN},
    "LowGPUUtilization": {
        "threshold_p95": 70,
        "threshold_p5": 10,
        "window": 500,
        "patience": 1000,
        "scan_interval_us": SCAN,
    },
    "MaxInitializationTime": {"threshold": 20, "scan_interval_us": SCAN},
    "OverallSystemUsage": {"scan_interval_us": SCAN},
    "StepOutlier": {"stddev": 3, "mode": None, "n_outliers": 10, "scan_interval_us": SCAN},
}

# smdebug-rulesconfig's rule groups (reference §4.3).
GROUPS = {
    "UNIVERSAL": {
        "AllZero",
        "ClassImbalance",
        "Confusion",
        "LossNotDecreasing",
        "Overfit",
        "Overtraining",
        "SimilarAcrossRuns",
        "StalledTrainingRule",
        "UnchangedTensor",
    },
    "DEEP_LEARNING": {
        "DeadRelu",
        "ExplodingTensor",
        "PoorWeightInitialization",
        "SaturatedActivation",
        "TensorVariance",
        "VanishingGradient",
        "WeightUpdateRatio",
    },
    "DL_APPLICATION": {"CheckInputImages", "NLPSequenceRatio"},
    "XGBOOST": {"FeatureImportanceOverweight", "TreeDepth"},
}


def test_the_catalogue_holds_every_built_in_rule_once() -> None:
    debugging = [spec.name for spec in catalogue.debugging_rules()]
    profiler = [spec.name for spec in catalogue.profiler_rules()]
    in_training = ["LossSpike", "GradientNormSpike"]  # trainprobe's, judged inside the training
    ours = [*in_training, "ReplicaDivergence"]
    assert sorted(debugging) == sorted([*SPEC_DEFAULTS, "CreateXgboostReport", *ours])
    assert [spec.name for spec in catalogue.debugging_rules() if spec.in_training] == in_training
    assert sorted(profiler) == sorted(
        [*PROFILER_DEFAULTS, "OverallFrameworkMetrics", "ProfilerReport"]
    )
    assert [spec.name for spec in catalogue.all_rules()] == debugging + profiler
    assert {spec.kind for spec in catalogue.debugging_rules()} == {"debugging"}
    assert {spec.kind for spec in catalogue.profiler_rules()} == {"profiler"}


@pytest.mark.parametrize("rule", sorted(SPEC_DEFAULTS))
def test_debugging_rule_defaults_are_the_spec_tables(rule: str) -> None:
    spec = catalogue.get(rule)
    assert spec.parameter_names == tuple(SPEC_DEFAULTS[rule])
    for name, text in SPEC_DEFAULTS[rule].items():
        parameter = spec.parameter(name)
        expected = None if text is None else parameter.convert(text, name)
        assert parameter.default == expected, name


def test_each_rule_s_defaults_individually() -> None:
    assert catalogue.get("VanishingGradient").defaults() == {"threshold": 1e-7}
    assert catalogue.get("TreeDepth").defaults() == {"depth": 4.0}
    assert catalogue.get("DeadRelu").defaults() == {
        "tensor_regex": (".*relu_output",),
        "threshold_inactivity": 1.0,
        "threshold_layer": 50.0,
    }
    assert catalogue.get("SaturatedActivation").defaults()["threshold_sigmoid_min"] == -23.0
    assert catalogue.get("WeightUpdateRatio").defaults()["epsilon"] == 1e-9
    assert catalogue.get("StalledTrainingRule").defaults() == {
        "threshold": 1800,
        "stop_training_on_fire": False,
        "training_job_name_prefix": None,
    }
    assert catalogue.get("NLPSequenceRatio").defaults()["token_values"] == (0.0,)
    assert catalogue.get("Confusion").defaults()["category_no"] is None
    assert catalogue.get("CreateXgboostReport").defaults() == {}


@pytest.mark.parametrize("rule", sorted(PROFILER_DEFAULTS))
def test_profiler_rule_defaults_are_rulesconfig_s(rule: str) -> None:
    spec = catalogue.get(rule)
    sent = {p.name: p.default for p in spec.parameters if p.in_rulesconfig}
    assert sent == PROFILER_DEFAULTS[rule]
    assert all(type(sent[k]) is type(v) for k, v in PROFILER_DEFAULTS[rule].items())


def test_profiler_rules_record_the_defaults_other_sources_give() -> None:
    # reference §5.3: smdebug's rule code and the AWS docs differ from rulesconfig here.
    def alternatives(rule: str, name: str) -> dict[object, str]:
        parameter = catalogue.get(rule).parameter(name)
        return {alternative.value: alternative.source for alternative in parameter.alternatives}

    assert "code" in alternatives("LoadBalancing", "threshold")[0.2]
    assert "documentation" in alternatives("LoadBalancing", "patience")[10]
    assert "documentation" in alternatives("StepOutlier", "stddev")[5]
    assert "documentation" in alternatives("CPUBottleneck", "patience")[100]
    assert "documentation" in alternatives("IOBottleneck", "gpu_threshold")[70]
    assert set(alternatives("GPUMemoryIncrease", "increase")) == {10}
    assert set(alternatives("GPUMemoryIncrease", "window")) == {500}
    dataloader = catalogue.get("Dataloader").parameter("patience")
    assert (dataloader.default, dataloader.in_rulesconfig) == (10, False)
    mode = catalogue.get("LossNotDecreasing").parameter("mode")
    assert mode.default == "GLOBAL"
    assert [alternative.value for alternative in mode.alternatives] == [None]


def test_profiler_report_runs_the_eleven_profiler_rules() -> None:
    report = catalogue.get("ProfilerReport")
    assert [spec.name for spec in report.runs] == [
        spec.name for spec in catalogue.profiler_rules()[:-1]
    ]
    assert len(report.runs) == 11


def test_frameworks_follow_the_rule_groups() -> None:
    deep_learning = {"pytorch", "tensorflow", "mxnet"}
    expected = {
        "UNIVERSAL": deep_learning | {"xgboost"},
        "DEEP_LEARNING": deep_learning,
        "DL_APPLICATION": deep_learning,
        "XGBOOST": {"xgboost"},
    }
    for group, rules in GROUPS.items():
        for rule in rules:
            spec = catalogue.get(rule)
            assert spec.group == group
            if rule != "TensorVariance":
                assert set(spec.frameworks) == expected[group], rule
    # The spec says TensorVariance applies to XGBoost too; the spec wins over the group.
    assert set(catalogue.get("TensorVariance").frameworks) == deep_learning | {"xgboost"}
    assert catalogue.get("CreateXgboostReport").frameworks == ("xgboost",)


def test_collections_are_the_ones_rulesconfig_attaches() -> None:
    def collections(rule: str) -> dict[str, dict[str, str]]:
        return {need.name: need.parameter_dict() for need in catalogue.get(rule).collections}

    assert collections("VanishingGradient") == {"gradients": {"save_interval": "500"}}
    assert collections("DeadRelu") == {
        "relu_output": {"include_regex": ".*relu_output", "save_interval": "500"}
    }
    assert collections("CreateXgboostReport")["hyperparameters"] == {"save_steps": "0"}
    assert collections("CreateXgboostReport")["labels"] == {"save_interval": "5"}
    assert collections("AllZero") == {}


def test_get_matches_exactly_then_ignoring_case_then_the_sdk_name() -> None:
    assert catalogue.get("VanishingGradient").name == "VanishingGradient"
    assert catalogue.get("vanishinggradient").name == "VanishingGradient"
    assert catalogue.get("vanishing_gradient").name == "VanishingGradient"
    assert catalogue.get("CPUBOTTLENECK").name == "CPUBottleneck"


def test_get_an_unknown_rule_names_the_field_and_suggests() -> None:
    with pytest.raises(ConfigError) as caught:
        catalogue.get("VanishingGradiant")
    assert caught.value.field == "rule_to_invoke"
    assert caught.value.suggestion == "VanishingGradient"
    assert len(str(caught.value)) < 200
    with pytest.raises(ConfigError) as caught:
        catalogue.get("Nothing like it")
    assert caught.value.suggestion is None


def test_parameter_lookup_suggests_the_closest_name() -> None:
    spec = catalogue.get("DeadRelu")
    assert spec.parameter("threshold_layer").type is ParamType.FLOAT
    with pytest.raises(ConfigError) as caught:
        spec.parameter("threshold_layr")
    assert caught.value.suggestion == "threshold_layer"
    assert caught.value.field == "DeadRelu.threshold_layr"


def test_convert_reads_strings_by_the_declared_type() -> None:
    converted = catalogue.get("UnchangedTensor").convert(
        {
            "collection_names": "losses, weights",
            "num_steps": "5",
            "rtol": "1e-3",
            "equal_nan": "true",
            "tensor_regex": "None",
        }
    )
    assert converted == {
        "collection_names": ("losses", "weights"),
        "num_steps": 5,
        "rtol": 0.001,
        "equal_nan": True,
        "tensor_regex": None,
    }
    nlp = catalogue.get("NLPSequenceRatio").convert({"token_values": "3, 0"})
    assert nlp == {"token_values": (3.0, 0.0)}


def test_convert_accepts_python_values_too() -> None:
    converted = catalogue.get("ClassImbalance").convert(
        {"samples": 100, "argmax": True, "threshold_imbalance": 5}
    )
    assert converted == {"samples": 100, "argmax": True, "threshold_imbalance": 5.0}
    regexes = catalogue.get("AllZero").convert({"tensor_regex": [".*a", ".*b"]})
    assert regexes == {"tensor_regex": (".*a", ".*b")}


def test_effective_parameters_are_the_defaults_updated() -> None:
    effective = catalogue.get("Overfit").effective_parameters({"patience": "3"})
    assert effective == {
        "tensor_regex": None,
        "start_step": 0,
        "patience": 3,
        "ratio_threshold": 0.1,
    }


@pytest.mark.parametrize(
    ("rule", "key", "value"),
    [
        ("VanishingGradient", "threshold", "small"),
        ("VanishingGradient", "threshold", "nan"),
        ("VanishingGradient", "threshold", "None"),
        ("ClassImbalance", "samples", "1.5"),
        ("ClassImbalance", "samples", True),
        ("ClassImbalance", "argmax", "yes"),
        ("ClassImbalance", "labels_regex", 3),
        ("LossNotDecreasing", "diff_percent", "0"),
        ("LossNotDecreasing", "diff_percent", "100"),
        ("LossNotDecreasing", "increase_threshold_percent", "-1"),
        ("Confusion", "min_diag", "1.01"),
        ("Confusion", "category_no", "1"),
        ("DeadRelu", "threshold_layer", "150"),
        ("NLPSequenceRatio", "token_values", "3,x"),
        ("LossNotDecreasing", "mode", "eval"),
    ],
)
def test_wrong_types_and_out_of_range_values_are_rejected(
    rule: str, key: str, value: object
) -> None:
    with pytest.raises(ConfigError) as caught:
        catalogue.get(rule).convert({key: value})
    assert caught.value.field == f"RuleParameters.{key}"
    assert caught.value.value == value
    assert caught.value.allowed.startswith("expected")


def test_the_edges_of_the_spec_ranges() -> None:
    spec = catalogue.get("Confusion")
    assert spec.convert({"min_diag": "0", "max_off_diag": "1", "category_no": "2"}) == {
        "min_diag": 0.0,
        "max_off_diag": 1.0,
        "category_no": 2,
    }
    assert catalogue.get("LossNotDecreasing").convert({"diff_percent": "99.9"}) == {
        "diff_percent": 99.9
    }


def test_a_choice_error_suggests_the_valid_spelling() -> None:
    with pytest.raises(ConfigError) as caught:
        catalogue.get("LossNotDecreasing").convert({"mode": "eval"})
    assert caught.value.suggestion == "EVAL"


def test_an_unknown_parameter_is_rejected_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as caught:
        catalogue.get("VanishingGradient").convert(
            {"treshold": "1"}, field_prefix="rule_parameters"
        )
    assert caught.value.field == "rule_parameters.treshold"
    assert caught.value.suggestion == "threshold"


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigErrors) as caught:
        catalogue.get("LossNotDecreasing").convert(
            {"num_steps": "x", "diff_percent": "200", "modes": "EVAL"}
        )
    assert [error.field for error in caught.value] == [
        "RuleParameters.num_steps",
        "RuleParameters.diff_percent",
        "RuleParameters.modes",
    ]


def test_engine_keys_are_not_rule_parameters() -> None:
    spec = catalogue.get("VanishingGradient")
    raw = {
        "rule_to_invoke": "VanishingGradient",
        "action_json": '[{"name": "email", "endpoint": "a@b.com"}]',
        "other_trial_0": "s3://bucket/other",
        "start_step": "10",
        "end_step": "20",
        "threshold": "0.01",
    }
    assert spec.convert(raw) == {"threshold": 0.01}
    assert spec.engine_keys(raw) == {key: raw[key] for key in raw if key != "threshold"}


def test_start_step_is_a_parameter_where_the_rule_declares_it() -> None:
    overfit = catalogue.get("Overfit")
    assert overfit.convert({"start_step": "4"}) == {"start_step": 4}
    assert overfit.engine_keys({"start_step": "4"}) == {}
    with pytest.raises(ConfigError) as caught:
        catalogue.get("VanishingGradient").convert({"end_step": "-1"})
    assert caught.value.field == "RuleParameters.end_step"


def test_base_trial_and_a_foreign_rule_to_invoke_are_rejected() -> None:
    spec = catalogue.get("VanishingGradient")
    with pytest.raises(ConfigError) as caught:
        spec.convert({"base_trial": "job"})
    assert caught.value.field == "RuleParameters.base_trial"
    with pytest.raises(ConfigError) as caught:
        spec.convert({"rule_to_invoke": "DeadRelu"})
    assert caught.value.field == "RuleParameters.rule_to_invoke"


def test_required_parameters_can_come_from_other_trials() -> None:
    spec = catalogue.get("SimilarAcrossRuns")
    with pytest.raises(ConfigError) as caught:
        spec.convert({})
    assert caught.value.field == "RuleParameters.other_trial"
    assert spec.convert({"other_trial": "job-2"}) == {"other_trial": "job-2"}
    assert spec.convert({"other_trial_0": "s3://b/job-2"}) == {}


@pytest.mark.parametrize("rule", ["AllZero", "UnchangedTensor"])
def test_rules_that_need_tensors_named_say_so(rule: str) -> None:
    spec = catalogue.get(rule)
    with pytest.raises(ConfigError) as caught:
        spec.convert({})
    assert "collection_names, tensor_regex" in caught.value.allowed
    assert spec.convert({"collection_names": "weights"}) == {"collection_names": ("weights",)}


def test_tensor_variance_needs_tensors_and_a_threshold() -> None:
    spec = catalogue.get("TensorVariance")
    with pytest.raises(ConfigError) as caught:
        spec.convert({"collection_names": "weights"})
    assert "max_threshold, min_threshold" in caught.value.allowed
    assert spec.convert({"collection_names": "weights", "min_threshold": "1e-5"}) == {
        "collection_names": ("weights",),
        "min_threshold": 1e-5,
    }


@pytest.mark.parametrize(
    ("rule", "key", "others"),
    [
        ("AllZero", "tensor_regex", {"collection_names": "weights"}),
        ("ClassImbalance", "labels_regex", {}),
    ],
)
def test_a_regex_parameter_must_compile(rule: str, key: str, others: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        catalogue.get(rule).convert({key: "conv([", **others})
    assert caught.value.field == f"RuleParameters.{key}"
    assert "does not" in caught.value.allowed


def test_loss_not_decreasing_may_rely_on_the_losses_collection() -> None:
    spec = catalogue.get("LossNotDecreasing")
    assert spec.convert({}) == {}
    with pytest.raises(ConfigError):
        spec.convert({"use_losses_collection": "False"})


def test_profiler_report_takes_overrides_for_the_rules_it_runs() -> None:
    report = catalogue.get("ProfilerReport")
    converted = report.convert(
        {
            "cpubottleneck_cpu_threshold": "90",
            "StepOutlier_MODE": "TRAIN",
            "LoadBalancing_threshold": "0.3",
            "opt_out_telemetry": "True",
        }
    )
    assert converted == {
        "CPUBottleneck_cpu_threshold": 90.0,
        "StepOutlier_mode": "TRAIN",
        "LoadBalancing_threshold": 0.3,
        "opt_out_telemetry": True,
    }
    assert report.overrides_by_rule(converted) == {
        "CPUBottleneck": {"cpu_threshold": 90.0},
        "StepOutlier": {"mode": "TRAIN"},
        "LoadBalancing": {"threshold": 0.3},
    }


@pytest.mark.parametrize(
    ("key", "value", "suggestion"),
    [
        ("CPUBotleneck_cpu_threshold", "90", "CPUBottleneck_cpu_threshold"),
        ("CPUBottleneck_cpu_treshold", "90", "CPUBottleneck_cpu_threshold"),
        ("CPUBottleneck_cpu_threshold", "900", None),
        ("StepOutlier_patience", "3", None),
        ("threshold", "3", None),
    ],
)
def test_profiler_report_rejects_bad_overrides(
    key: str, value: str, suggestion: str | None
) -> None:
    with pytest.raises(ConfigError) as caught:
        catalogue.get("ProfilerReport").convert({key: value})
    assert caught.value.field == f"RuleParameters.{key}"
    if suggestion is not None:
        assert caught.value.suggestion == suggestion


def test_every_parameter_describes_itself() -> None:
    for spec in catalogue.all_rules():
        assert spec.description and len(spec.description) < 100, spec.name
        assert spec.sdk_name
        for parameter in spec.parameters:
            assert parameter.meaning, (spec.name, parameter.name)
            assert parameter.allowed.startswith("expected")
            if not parameter.required:
                value = parameter.convert(parameter.default, parameter.name)
                assert value == parameter.default, (spec.name, parameter.name)


def _spec_dir() -> Path | None:
    configured = os.environ.get("TRAINPROBE_SPEC_DIR")
    candidates = [Path(configured)] if configured else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "spec")
    for candidate in candidates:
        if (candidate / "003_57940c0e6c23217f.txt").is_file():
            return candidate
    return None


def _spec_lines(text: str, rule: str, names: set[str], label: str) -> dict[str, str]:
    """The ``label`` lines ("Default value", "Valid values") of a rule's spec section."""
    lines = text.splitlines()
    start = lines.index(rule)
    found: dict[str, str] = {}
    current = None
    for line in lines[start + 1 :]:
        if line.strip() in SPEC_DEFAULTS and line.strip() != rule:
            break
        words = line.split()
        if words and words[0] in names | {"base_trial"}:
            current = words[0]
        match = re.match(rf"{label}: (.*)", line)
        if match and current:
            found[current] = match.group(1)
    return found


def _clean(text: str) -> str:
    text = re.sub(r"\s*\(.*\)\s*$", "", text.strip()).rstrip(".").strip()
    return text.strip('"')


@pytest.mark.skipif(_spec_dir() is None, reason="the spec is not at hand (TRAINPROBE_SPEC_DIR)")
def test_defaults_match_the_spec_file() -> None:
    spec_dir = _spec_dir()
    assert spec_dir is not None
    text = (spec_dir / "003_57940c0e6c23217f.txt").read_text()
    for rule in SPEC_DEFAULTS:
        spec = catalogue.get(rule)
        found = _spec_lines(text, rule, set(spec.parameter_names), "Default values?")
        undocumented = {"other_trial", "training_job_name_prefix"}
        assert set(found) == set(spec.parameter_names) - undocumented, rule
        for name, default_text in found.items():
            parameter = spec.parameter(name)
            cleaned = _clean(default_text)
            expected = None if cleaned == "None" else parameter.convert(cleaned, name)
            assert parameter.default == expected, (rule, name, default_text)


# How the spec's "Valid values" read; a "String" described as a list of patterns or names is a
# string list in the catalogue.
SPEC_TYPE_WORDS = {
    "Float": {ParamType.FLOAT},
    "Integer": {ParamType.INTEGER},
    "Boolean": {ParamType.BOOLEAN},
    "String": {ParamType.STRING, ParamType.STRING_LIST},
    "List of strings or a comma-separated string": {ParamType.STRING_LIST},
    "Comma-separated string of floats": {ParamType.FLOAT_LIST},
    "Comma-separated string of numerical values": {ParamType.FLOAT_LIST},
}


@pytest.mark.skipif(_spec_dir() is None, reason="the spec is not at hand (TRAINPROBE_SPEC_DIR)")
def test_types_and_ranges_match_the_spec_file() -> None:
    spec_dir = _spec_dir()
    assert spec_dir is not None
    text = (spec_dir / "003_57940c0e6c23217f.txt").read_text()
    ranges = {
        "0 < float < 100": (0.0, 100.0, True, True),
        "0.0 < float < 100": (0.0, 100.0, True, True),
        "0≤float≤1": (0.0, 1.0, False, False),
    }
    for rule in SPEC_DEFAULTS:
        spec = catalogue.get(rule)
        found = _spec_lines(text, rule, set(spec.parameter_names), "Valid values")
        for name, words in found.items():
            if name == "base_trial":
                continue
            parameter = spec.parameter(name)
            if words in ranges:
                assert parameter.type is ParamType.FLOAT, (rule, name)
                bounds = (
                    parameter.minimum,
                    parameter.maximum,
                    parameter.min_exclusive,
                    parameter.max_exclusive,
                )
                assert bounds == ranges[words], (rule, name)
            elif words == "Integer ≥2":
                assert (parameter.type, parameter.minimum) == (ParamType.INTEGER, 2.0)
            elif words.startswith("String ("):
                assert parameter.choices == ("EVAL", "TRAIN", "GLOBAL")
            else:
                assert parameter.type in SPEC_TYPE_WORDS[words], (rule, name, words)
