"""CreateTrainingJob / UpdateTrainingJob requests: the spec's own examples, round trips, errors."""

from __future__ import annotations

import copy
import json

import pytest

from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.request_json import load_request, parse_request
from trainprobe.config.training_job import TrainingJobRequest, UpdateTrainingJobRequest

RULES_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"
CUSTOM_IMAGE = (
    "552407032007.dkr.ecr.ap-south-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"
)

# Spec 001: a built-in rule on the gradients collection, and the ProfilerReport rule.
SPEC_BUILT_IN = {
    "TrainingJobName": "vanishing-gradient-demo",
    "DebugHookConfig": {
        "S3OutputPath": "s3://bucket/path-to-tensors",
        "CollectionConfigurations": [
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}
        ],
    },
    "DebugRuleConfigurations": [
        {
            "RuleConfigurationName": "VanishingGradient",
            "RuleEvaluatorImage": RULES_IMAGE,
            "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "20.0"},
        }
    ],
    "ProfilerRuleConfigurations": [
        {
            "RuleConfigurationName": "ProfilerReport",
            "RuleEvaluatorImage": RULES_IMAGE,
            "RuleParameters": {
                "rule_to_invoke": "ProfilerReport",
                "CPUBottleneck_cpu_threshold": "90",
                "IOBottleneck_threshold": "90",
            },
        }
    ],
}

# Spec 001: a custom rule read from a source file.
SPEC_CUSTOM = {
    "TrainingJobName": "improper-activation",
    "DebugHookConfig": {
        "S3OutputPath": "s3://bucket/",
        "CollectionConfigurations": [
            {
                "CollectionName": "relu_activations",
                "CollectionParameters": {
                    "include_regex": "relu",
                    "save_interval": "500",
                    "end_step": "5000",
                },
            }
        ],
    },
    "DebugRuleConfigurations": [
        {
            "RuleConfigurationName": "improper_activation_job",
            "RuleEvaluatorImage": CUSTOM_IMAGE,
            "InstanceType": "ml.c4.xlarge",
            "VolumeSizeInGB": 400,
            "RuleParameters": {
                "source_s3_uri": "s3://bucket/custom_rules.py",
                "rule_to_invoke": "ImproperActivation",
                "collection_names": "relu_activations",
            },
        }
    ],
}

# Spec 001's ProfilerConfig, with its sub-configs written as the spec writes them: strings with
# comments and quoted numbers.
SPEC_PROFILER = {
    "ProfilingIntervalInMilliseconds": 500,
    "ProfilingParameters": {
        "DetailedProfilingConfig": (
            '{\n "StartStep": "7", // The default is the first step (step 0)\n'
            ' "NumSteps": "1", // The default value is 1\n}'
        ),
        "PythonProfilingConfig": (
            '{\n "StartStep": "9", // The default is the first step (step 0)\n'
            ' "NumSteps": "3", // The default value is 3\n'
            ' "cProfileTimer": "total_time", // Available options: cpu, off_cpu, total_time\n'
            ' "ProfilerName" : "cProfile", // Available options: cProfile, Pyinstrument\n}'
        ),
        "DataLoaderProfilingConfig": (
            '{\n "StartStep": "5", // The default is the first step (step 0)\n'
            ' "NumSteps": "1" // The default value is 1\n}'
        ),
    },
}


def test_spec_examples_parse_and_round_trip() -> None:
    for example in (SPEC_BUILT_IN, SPEC_CUSTOM, {**SPEC_BUILT_IN, "ProfilerConfig": SPEC_PROFILER}):
        request = TrainingJobRequest.from_request_dict(example)
        again = TrainingJobRequest.from_request_dict(request.to_request_dict())
        assert again == request


def test_parsed_request_carries_the_rules_and_hook() -> None:
    request = TrainingJobRequest.from_request_dict(SPEC_BUILT_IN)
    assert [rule.name for rule in request.debug_rules] == ["VanishingGradient"]
    assert request.debug_rules[0].rule_parameters["threshold"] == "20.0"
    assert [rule.name for rule in request.profiler_rules] == ["ProfilerReport"]
    assert request.debug_hook_config is not None
    dumped = request.to_request_dict()
    assert (
        dumped["DebugHookConfig"]["CollectionConfigurations"]
        == (SPEC_BUILT_IN["DebugHookConfig"]["CollectionConfigurations"])
    )


def test_members_trainprobe_does_not_act_on_pass_through_unchanged() -> None:
    example = {
        **SPEC_BUILT_IN,
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "ResourceConfig": {"InstanceCount": 2, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 5},
    }
    dumped = TrainingJobRequest.from_request_dict(example).to_request_dict()
    for key in ("RoleArn", "OutputDataConfig", "ResourceConfig"):
        assert dumped[key] == example[key]


def test_spec_typo_in_member_name_is_named_with_the_right_spelling() -> None:
    # Spec 001 itself writes "DebugRulesConfigurations" in its custom-rule example.
    example = copy.deepcopy(SPEC_CUSTOM)
    example["DebugRulesConfigurations"] = example.pop("DebugRuleConfigurations")
    with pytest.raises(ConfigErrors) as raised:
        TrainingJobRequest.from_request_dict(example)
    (error,) = raised.value.errors
    assert error.field == "DebugRulesConfigurations"
    assert error.suggestion == "DebugRuleConfigurations"
    assert "Did you mean 'DebugRuleConfigurations'" in str(raised.value)


@pytest.mark.parametrize(
    "name",
    ["", "-starts-with-hyphen", "ends-with-hyphen-", "has_underscore", "x" * 64, 42],
)
def test_training_job_names_outside_sagemakers_pattern_are_refused(name: object) -> None:
    with pytest.raises(ConfigErrors) as raised:
        TrainingJobRequest.from_request_dict({**SPEC_BUILT_IN, "TrainingJobName": name})
    assert raised.value.errors[0].field == "TrainingJobName"
    assert "63" in str(raised.value)


def test_every_problem_is_reported_at_once_with_its_path() -> None:
    example = copy.deepcopy(SPEC_BUILT_IN)
    example["TrainingJobName"] = "bad_name"
    example["DebugRuleConfigurations"][0]["RuleParameters"]["threshhold"] = "1"
    example["ProfilerConfig"] = {"ProfilingIntervalInMilliseconds": 300}
    with pytest.raises(ConfigErrors) as raised:
        TrainingJobRequest.from_request_dict(example)
    fields = [error.field for error in raised.value.errors]
    assert "TrainingJobName" in fields
    assert any(f.startswith("DebugRuleConfigurations[0].RuleParameters.threshhold") for f in fields)
    assert any(f.startswith("ProfilerConfig.ProfilingIntervalInMilliseconds") for f in fields)
    assert "'threshold'" in str(raised.value)  # the suggestion for the misspelt parameter


def test_more_than_twenty_rules_of_a_kind_are_refused() -> None:
    rule = SPEC_BUILT_IN["DebugRuleConfigurations"][0]
    rules = [{**rule, "RuleConfigurationName": f"rule-{i}"} for i in range(21)]
    with pytest.raises(ConfigErrors) as raised:
        TrainingJobRequest.from_request_dict({**SPEC_BUILT_IN, "DebugRuleConfigurations": rules})
    assert any("at most 20" in str(error) for error in raised.value.errors)
    # Twenty is fine.
    TrainingJobRequest.from_request_dict({**SPEC_BUILT_IN, "DebugRuleConfigurations": rules[:20]})


def test_two_rules_with_one_name_are_refused() -> None:
    rule = SPEC_BUILT_IN["DebugRuleConfigurations"][0]
    with pytest.raises(ConfigErrors) as raised:
        TrainingJobRequest.from_request_dict(
            {**SPEC_BUILT_IN, "DebugRuleConfigurations": [rule, rule]}
        )
    assert raised.value.errors[0].field == "DebugRuleConfigurations[1].RuleConfigurationName"


def test_hyperparameters_must_be_strings() -> None:
    with pytest.raises(ConfigErrors) as raised:
        TrainingJobRequest.from_request_dict({**SPEC_BUILT_IN, "HyperParameters": {"epochs": 3}})
    assert raised.value.errors[0].field == "HyperParameters.epochs"


def test_update_request_carries_profiler_config_and_rules() -> None:
    update = UpdateTrainingJobRequest.from_request_dict(
        {
            "TrainingJobName": "vanishing-gradient-demo",
            "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 1000, "DisableProfiler": False},
            "ProfilerRuleConfigurations": SPEC_BUILT_IN["ProfilerRuleConfigurations"],
        }
    )
    assert update.profiler_config is not None
    assert update.to_request_dict()["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] == 1000
    again = UpdateTrainingJobRequest.from_request_dict(update.to_request_dict())
    assert again == update


def test_update_request_can_disable_the_profiler() -> None:
    update = UpdateTrainingJobRequest.from_request_dict(
        {"TrainingJobName": "job-1", "ProfilerConfig": {"DisableProfiler": True}}
    )
    assert update.to_request_dict()["ProfilerConfig"]["DisableProfiler"] is True


def test_update_request_needs_something_to_update() -> None:
    with pytest.raises(ConfigErrors):
        UpdateTrainingJobRequest.from_request_dict({"TrainingJobName": "job-1"})


def test_malformed_json_is_reported_with_line_and_column(tmp_path) -> None:
    path = tmp_path / "job.json"
    path.write_text('{\n  "TrainingJobName": "a",\n  "HyperParameters": {"epochs": "3",}\n}\n')
    with pytest.raises(ConfigError) as raised:
        load_request(f"file://{path}")
    assert "line 3" in str(raised.value)
    assert "column" in str(raised.value)


def test_request_must_be_an_object() -> None:
    with pytest.raises(ConfigError, match="JSON object"):
        parse_request(json.dumps([1, 2]))


def test_missing_request_file_is_named(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"nothing-here\.json"):
        load_request(str(tmp_path / "nothing-here.json"))
