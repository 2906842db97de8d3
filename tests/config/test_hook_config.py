"""CollectionConfig, DebuggerHookConfig and TensorBoardOutputConfig against sagemaker.debugger.

The same expressions are built in the SDK (one reference subprocess) and in trainprobe; their
request dictionaries must be equal and read back into equal objects. Parameter checks are
trainprobe's own: the SDK passes any parameter through, and smdebug fails later, in the job.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference_envs import run_reference
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.hook_config import (
    REDUCTIONS,
    CollectionConfig,
    DebuggerHookConfig,
    TensorBoardOutputConfig,
    check_collection_parameters,
    check_hook_parameters,
)

NAMESPACE = {
    "CollectionConfig": CollectionConfig,
    "DebuggerHookConfig": DebuggerHookConfig,
    "TensorBoardOutputConfig": TensorBoardOutputConfig,
}

COLLECTIONS = [
    'CollectionConfig("losses")',
    'CollectionConfig(name="gradients", parameters={"save_interval": "500"})',
    'CollectionConfig("losses", {"train.save_interval": "100", "eval.save_interval": "10"})',
    'CollectionConfig("weights", {"save_histogram": "False", "reductions": "min,max,abs_l2_norm",'
    ' "save_raw_tensor": "true"})',
    'CollectionConfig("custom", {"include_regex": ".*relu_output,conv.*", "save_steps": "1,2,3",'
    ' "start_step": "0", "end_step": "100", "save_shape": "TRUE"})',
    'CollectionConfig("all", {"global.save_steps": "5", "predict.start_step": "3",'
    ' "predict.end_step": "9", "eval.save_steps": "0, 4"})',
    'CollectionConfig("relu_output", {"include_regex": ".*relu_output", "save_interval": "500"})',
    'CollectionConfig("empty", {})',
]

HOOKS = [
    "DebuggerHookConfig()",
    'DebuggerHookConfig(s3_output_path="s3://b/p")',
    'DebuggerHookConfig(s3_output_path="s3://b/p", container_local_output_path="/opt/ml/output/t")',
    'DebuggerHookConfig(hook_parameters={"save_interval": "100", "include_workers": "all",'
    ' "save_all": "true", "reductions": "mean,abs_l1_norm", "export_tensorboard": "false",'
    ' "tensorboard_dir": "/opt/tb", "train.save_interval": "50", "include_regex": "fc.*"})',
    # Each collection once: a request that configures one twice is refused (see below).
    f"DebuggerHookConfig(s3_output_path='s3://b/p', "
    f"collection_configs=[{', '.join(COLLECTIONS[:2] + COLLECTIONS[3:])}])",
    "DebuggerHookConfig(collection_configs=[])",
    'DebuggerHookConfig("s3://b/p", "/local", {"save_steps": "1,2"}, [CollectionConfig("losses")])',
]

TENSORBOARD = [
    'TensorBoardOutputConfig("s3://b/tb")',
    'TensorBoardOutputConfig("s3://b/tb", container_local_output_path="/opt/ml/output/tb")',
]

CASES = COLLECTIONS + HOOKS + TENSORBOARD

_REFERENCE = """
import json
from sagemaker.debugger import CollectionConfig, DebuggerHookConfig, TensorBoardOutputConfig
built = {expression: eval(expression)._to_request_dict() for expression in json.loads(CASES)}
try:
    CollectionConfig("a") == "a"
    compared = None
except Exception as error:
    compared = type(error).__name__
P = {"save_interval": "1"}
same = CollectionConfig("a", P) == CollectionConfig("a", dict(P))
hashes = len({CollectionConfig("a", P), CollectionConfig("a", dict(P))})
print(json.dumps({"built": built, "compared": compared, "same": same, "hashes": hashes}))
"""


@pytest.fixture(scope="module")
def sdk() -> dict[str, Any]:
    """What the SageMaker SDK builds for CASES, in one subprocess."""
    result = run_reference("sagemaker", f"CASES = {json.dumps(json.dumps(CASES))}\n{_REFERENCE}")
    assert isinstance(result, dict)
    return result


def build(expression: str) -> Any:
    return eval(expression, dict(NAMESPACE))


@pytest.mark.parametrize("expression", CASES)
def test_request_dict_matches_the_sdk(sdk: dict[str, Any], expression: str) -> None:
    assert build(expression)._to_request_dict() == sdk["built"][expression]
    assert build(expression).to_request_dict() == sdk["built"][expression]


@pytest.mark.parametrize("expression", CASES)
def test_the_sdk_request_reads_back(sdk: dict[str, Any], expression: str) -> None:
    built = build(expression)
    request = sdk["built"][expression]
    parsed = type(built).from_request_dict(request)
    assert parsed == built
    assert parsed._to_request_dict() == request


def test_collection_equality_behaves_as_in_the_sdk(sdk: dict[str, Any]) -> None:
    assert sdk["compared"] == "TypeError"
    with pytest.raises(TypeError):
        _ = CollectionConfig("a") == "a"
    one = CollectionConfig("a", {"save_interval": "1"})
    assert (one == CollectionConfig("a", {"save_interval": "1"})) is sdk["same"]
    assert len({one, CollectionConfig("a", {"save_interval": "1"})}) == sdk["hashes"]
    assert one != CollectionConfig("a", {"save_interval": "2"})


# The spec's CollectionConfig examples (spec 003's rule pages and spec 001's requests).


@pytest.mark.parametrize(
    ("name", "parameters"),
    [
        ("custom_relu_collection", {"include_regex": ".*relu_output|.*ReLU_output"}),
        ("gradients", {"save_interval": "500"}),
        ("custom_relu_collection", {"include_regex": ".*relu_input|.*ReLU_input"}),
        ("custom_activations_collection", {"include_regex": ".*tanh_input|.*sigmoid_input"}),
        ("weights", {"train.save_interval": "100"}),
        ("losses", {"train.save_interval": "100", "eval.save_interval": "10"}),
        ("custom_output_collection", {"include_regex": ".*labels|.*predictions"}),
        ("custom_inputs_collection", {"include_regex": ".*hybridsequential0_input_0"}),
        ("custom_inputs_collection", {"include_regex": ".*embedding0_input_0"}),
        ("predictions", {"include_regex": "500"}),
        ("relu_activations", {"include_regex": "relu", "save_interval": "500", "end_step": "5000"}),
    ],
)
def test_spec_collection_examples_are_accepted(name: str, parameters: dict[str, str]) -> None:
    config = CollectionConfig(name=name, parameters=parameters)
    assert CollectionConfig.from_request_dict(config._to_request_dict()) == config


def test_spec_001_debug_hook_config_reads() -> None:
    request = {
        "S3OutputPath": "s3://bucket/path-to-tensors",
        "CollectionConfigurations": [
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}
        ],
    }
    config = DebuggerHookConfig.from_request_dict(request)
    assert config.collection_configs == [CollectionConfig("gradients", {"save_interval": "500"})]
    assert config._to_request_dict() == request


# Parameter checks: keys, values, suggestions, and every problem at once.


def _fields(caught: pytest.ExceptionInfo[ConfigErrors]) -> dict[str, ConfigError]:
    return {error.field: error for error in caught.value.errors}


@pytest.mark.parametrize(
    ("key", "closest"),
    [
        ("save_intervall", "save_interval"),
        ("train.save_intervl", "train.save_interval"),
        ("evaluate.save_steps", "eval.save_steps"),
        ("include_regx", "include_regex"),
        ("reduction", "reductions"),
    ],
)
def test_a_misspelt_collection_key_suggests_the_closest(key: str, closest: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        CollectionConfig("losses", {key: "1"})
    error = _fields(caught)[f"CollectionConfig('losses').parameters.{key}"]
    assert error.suggestion == closest
    assert "save_interval" in error.allowed and "train." in error.allowed


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("save_interval", "0"),
        ("save_interval", "-5"),
        ("save_interval", "ten"),
        ("train.save_interval", "1.5"),
        ("start_step", "-1"),
        ("end_step", "x"),
        ("save_steps", "1,two,3"),
        ("eval.save_steps", "1;2"),
        ("save_histogram", "yes"),
        ("save_raw_tensor", "1"),
        ("save_shape", ""),
        ("include_regex", "conv(,fc"),
        ("reductions", "min,median"),
        ("reductions", "abs_median"),
        ("reductions", "l3_norm"),
        ("reductions", "mean,Max"),
        ("save_interval", True),
        ("include_regex", 5),
    ],
)
def test_a_bad_collection_value_is_refused(key: str, value: object) -> None:
    errors = check_collection_parameters({key: value})
    assert [error.field for error in errors] == [key]
    assert errors[0].value == value


def test_median_is_refused_and_the_reason_given() -> None:
    errors = check_collection_parameters({"reductions": "min,median"})
    assert "smdebug rejects it" in errors[0].allowed


@pytest.mark.parametrize(
    "parameters",
    [
        {"save_interval": 100, "save_histogram": True, "start_step": 0},
        {"reductions": ",".join(REDUCTIONS)},
        {"reductions": "min, max ,mean"},
        {"save_histogram": "False", "save_raw_tensor": "TRUE", "save_shape": "true"},
        {"include_regex": "a.*,b[0-9]+", "save_steps": " 1, 2 ,3"},
        {"start_step": "10", "end_step": "10"},
    ],
)
def test_good_collection_values_pass(parameters: dict[str, object]) -> None:
    assert check_collection_parameters(parameters) == []


def test_end_step_before_start_step_is_refused() -> None:
    errors = check_collection_parameters({"train.start_step": "10", "train.end_step": "5"})
    assert [error.field for error in errors] == ["train.end_step"]


def test_hook_parameters_are_checked() -> None:
    assert check_hook_parameters({"include_workers": "one", "save_all": "TRUE"}) == []
    errors = check_hook_parameters(
        {"include_workers": "some", "export_tensorboard": "maybe", "save_al": "true"}
    )
    assert {error.field: error.suggestion for error in errors} == {
        "include_workers": None,
        "export_tensorboard": None,
        "save_al": "save_all",
    }
    assert check_hook_parameters({"save_histogram": "true"})[0].field == "save_histogram"


def test_every_problem_in_a_request_is_reported_by_its_path() -> None:
    request = {
        "S3OutputPath": "s3://b/p",
        "LocalPath": "",
        "HookParameters": {"save_interval": "0", "include_workers": "most"},
        "CollectionConfigurations": [
            {"CollectionName": "weights", "CollectionParameters": {"save_interval": "5"}},
            {"CollectionName": "losses", "CollectionParameters": {"train.save_interval": "x"}},
            {"CollectionParameters": {"reductions": "median"}},
            "gradients",
        ],
        "CollectionConfiguration": [],
    }
    with pytest.raises(ConfigErrors) as caught:
        DebuggerHookConfig.from_request_dict(request)
    fields = _fields(caught)
    assert set(fields) == {
        "LocalPath",
        "HookParameters.save_interval",
        "HookParameters.include_workers",
        "CollectionConfigurations[1].CollectionParameters.train.save_interval",
        "CollectionConfigurations[2].CollectionName",
        "CollectionConfigurations[2].CollectionParameters.reductions",
        "CollectionConfigurations[3]",
        "CollectionConfiguration",
    }
    assert fields["CollectionConfiguration"].suggestion == "CollectionConfigurations"
    assert isinstance(caught.value, ValueError)


def test_python_arguments_are_checked_when_built() -> None:
    with pytest.raises(ConfigErrors) as caught:
        DebuggerHookConfig(
            s3_output_path=5,  # type: ignore[arg-type]
            hook_parameters={"save_steps": "a"},
            collection_configs=["losses"],  # type: ignore[list-item]
        )
    assert set(_fields(caught)) == {
        "DebuggerHookConfig.s3_output_path",
        "DebuggerHookConfig.hook_parameters.save_steps",
        "DebuggerHookConfig.collection_configs[0]",
    }
    with pytest.raises(ConfigErrors):
        CollectionConfig("")
    with pytest.raises(ConfigErrors):
        TensorBoardOutputConfig(s3_output_path=None, container_local_output_path=3)  # type: ignore[arg-type]


def test_tensorboard_request_needs_an_output_path() -> None:
    with pytest.raises(ConfigErrors) as caught:
        TensorBoardOutputConfig.from_request_dict({"LocalPath": "/tb", "Local": "/x"})
    fields = _fields(caught)
    assert set(fields) == {"S3OutputPath", "Local"}
    assert fields["Local"].suggestion == "LocalPath"


def test_hook_configs_compare_by_what_they_send() -> None:
    one = DebuggerHookConfig("s3://b/p", collection_configs=[CollectionConfig("losses")])
    assert one == DebuggerHookConfig("s3://b/p", collection_configs=[CollectionConfig("losses")])
    assert one != DebuggerHookConfig("s3://b/q", collection_configs=[CollectionConfig("losses")])
    assert TensorBoardOutputConfig("s3://a") != TensorBoardOutputConfig("s3://a", "/tb")


def test_a_request_that_configures_a_collection_twice_is_refused() -> None:
    request = {
        "CollectionConfigurations": [
            {"CollectionName": "weights"},
            {"CollectionName": "losses"},
            {"CollectionName": "weights", "CollectionParameters": {"save_interval": "5"}},
        ]
    }
    with pytest.raises(ConfigErrors) as caught:
        DebuggerHookConfig.from_request_dict(request)
    assert [error.field for error in caught.value] == ["CollectionConfigurations[2]"]
    assert caught.value.errors[0].value == "weights"
