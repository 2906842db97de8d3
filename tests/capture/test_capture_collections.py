"""Collections: membership by unanchored regex or listed name, built-in patterns, the JSON form."""

from __future__ import annotations

import pytest

from trainprobe.capture.collections import (
    RULE_COLLECTIONS,
    Collection,
    CollectionKeys,
    CollectionSet,
)
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys

NAMES = [
    "Net_fc1.weight",
    "Net_fc1.bias",
    "gradient/Net_fc1.weight",
    "gradient/Net_fc1.bias",
    "CrossEntropyLoss_output_0",
    "CrossEntropyLoss_input_0",
    "relu_output_0",
    "layer1.relu_input_0",
    "nll_loss_output_0",
]


def members(collection: Collection) -> list[str]:
    return [name for name in NAMES if collection.matches(name)]


def test_pytorch_builtins_use_smdebugs_patterns() -> None:
    collections = CollectionSet()
    assert members(collections.get(CollectionKeys.WEIGHTS)) == ["Net_fc1.weight"]
    assert members(collections.get(CollectionKeys.BIASES)) == ["Net_fc1.bias"]
    assert members(collections.get(CollectionKeys.GRADIENTS)) == [
        "gradient/Net_fc1.weight",
        "gradient/Net_fc1.bias",
    ]
    # the losses pattern takes outputs of anything named like a loss, never its inputs
    assert members(collections.get(CollectionKeys.LOSSES)) == [
        "CrossEntropyLoss_output_0",
        "nll_loss_output_0",
    ]
    assert members(collections.get(CollectionKeys.DEFAULT)) == []


def test_rule_collections_come_with_their_patterns() -> None:
    collections = CollectionSet()
    relu = collections.get(CollectionKeys.RELU_OUTPUT)
    assert relu.include_regex == list(RULE_COLLECTIONS["relu_output"])
    assert members(relu) == ["relu_output_0"]
    assert members(collections.get("relu_input")) == ["layer1.relu_input_0"]


def test_patterns_match_anywhere_in_the_name() -> None:
    collection = Collection("mine", include_regex=["fc1"])
    assert members(collection) == [
        "Net_fc1.weight",
        "Net_fc1.bias",
        "gradient/Net_fc1.weight",
        "gradient/Net_fc1.bias",
    ]
    anchored = Collection("anchored", include_regex=["^fc1"])
    assert members(anchored) == []


def test_listed_names_and_later_includes_count() -> None:
    collection = Collection("mine", tensor_names=["relu_output_0"])
    assert members(collection) == ["relu_output_0"]
    before = collection.revision
    collection.include("_input_")
    assert collection.revision > before
    assert members(collection) == [
        "CrossEntropyLoss_input_0",
        "relu_output_0",
        "layer1.relu_input_0",
    ]


def test_a_bad_pattern_is_refused_when_given() -> None:
    with pytest.raises(ConfigError) as raised:
        Collection("mine", include_regex=["fc1("])
    assert raised.value.value == "fc1("


def test_only_new_collections_without_patterns_are_empty() -> None:
    collections = CollectionSet()
    assert not collections.get("weights").needs_patterns()
    assert not collections.get("default").needs_patterns()
    assert collections.get("custom").needs_patterns()
    assert not collections.get("relu_output").needs_patterns()


def test_the_collections_file_entry_round_trips() -> None:
    collection = Collection(
        "weights",
        include_regex=["^(?!gradient).*weight"],
        tensor_names=["b", "a"],
        reduction_config=ReductionConfig(reductions=["max"], save_raw_tensor=True),
        save_config=SaveConfig(
            mode_save_configs={mode: SaveConfigMode(save_interval=2) for mode in ModeKeys}
        ),
    )
    document = collection.to_json_dict()
    assert document["tensor_names"] == ["a", "b"]
    assert document["reduction_config"] == {
        "save_raw_tensor": True,
        "reductions": "max",
        "save_shape": False,
    }
    assert document["save_config"]["TRAIN"] == {
        "save_interval": 2,
        "save_steps": [],
        "start_step": 0,
        "end_step": None,
    }
    assert Collection.from_dict(document) == collection
