"""Reading a DebugHookConfig JSON file into the hook's arguments (reference/smdebug.md §1.3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainprobe.capture.collections import CollectionSet
from trainprobe.capture.hook_config_file import (
    DEFAULT_OUT_DIR,
    find_hook_config,
    parse_hook_config,
    read_hook_config,
)
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfigMode
from trainprobe.config.errors import ConfigErrors
from trainprobe.storage.modes import ModeKeys

DOCUMENT = {
    "S3Path": "s3://bucket/prefix",
    "LocalPath": "/opt/ml/output/tensors",
    "HookParameters": {
        "save_interval": "100",
        "start_step": "5",
        "train.save_interval": "50",
        "eval.save_steps": "1,2",
        "reductions": "min,max,abs_l2_norm",
        "include_regex": "fc1, relu",
        "save_all": "false",
        "include_workers": "all",
    },
    "CollectionConfigurations": [
        {"CollectionName": "weights", "CollectionParameters": {"eval.save_interval": "10"}},
        {
            "CollectionName": "relu_output",
            "CollectionParameters": {
                "include_regex": ".*relu_output",
                "save_interval": "7",
                "save_raw_tensor": "true",
                "reductions": "mean",
            },
        },
        {"CollectionName": "losses"},
    ],
}


def test_hook_parameters_become_the_hooks_arguments() -> None:
    arguments = parse_hook_config(DOCUMENT)
    assert arguments.out_dir == "/opt/ml/output/tensors"
    assert arguments.include_regex == ["fc1", "relu"]
    assert arguments.include_workers == "all"
    assert arguments.save_all is False
    assert arguments.reduction_config == ReductionConfig.parse("min,max,abs_l2_norm")
    assert arguments.include_collections == ["weights", "relu_output", "losses"]
    save = arguments.save_config
    assert save is not None
    assert save.get_save_config(ModeKeys.TRAIN) == SaveConfigMode(save_interval=50, start_step=5)
    assert save.get_save_config(ModeKeys.EVAL) == SaveConfigMode(100, 5, None, [1, 2])
    assert save.get_save_config(ModeKeys.GLOBAL) == SaveConfigMode(save_interval=100, start_step=5)


def test_collection_parameters_override_the_hooks_key_by_key_per_mode() -> None:
    weights, relu, losses = parse_hook_config(DOCUMENT).collections
    assert weights.save_config is not None
    # only eval.save_interval is the collection's own; the rest is the hook's, per mode
    assert weights.save_config.get_save_config(ModeKeys.EVAL) == SaveConfigMode(10, 5, None, [1, 2])
    assert weights.save_config.get_save_config(ModeKeys.TRAIN) == SaveConfigMode(50, 5)
    assert relu.save_config is not None
    # a plain key of the collection beats the hook's mode-specific key too
    assert relu.save_config.get_save_config(ModeKeys.TRAIN) == SaveConfigMode(7, 5)
    assert relu.reduction_config == ReductionConfig(reductions=["mean"], save_raw_tensor=True)
    assert relu.include_regex == (".*relu_output",)
    assert losses.reduction_config is None
    assert losses.save_config is not None
    assert losses.save_config.get_save_config(ModeKeys.TRAIN) == SaveConfigMode(50, 5)


def test_settings_apply_to_the_hooks_collections() -> None:
    collections = CollectionSet()
    for settings in parse_hook_config(DOCUMENT).collections:
        settings.apply(collections)
    relu = collections.get("relu_output")
    assert relu.include_regex == [".*relu_output"]
    assert relu.reduction_config == ReductionConfig(reductions=["mean"], save_raw_tensor=True)


def test_an_empty_document_gives_smdebugs_defaults() -> None:
    arguments = parse_hook_config({})
    assert arguments.out_dir == DEFAULT_OUT_DIR
    assert arguments.include_collections is None
    assert arguments.reduction_config is None
    assert arguments.save_config is not None
    assert arguments.save_config.get_save_config(ModeKeys.TRAIN) == SaveConfigMode()


def test_every_bad_value_is_reported_at_once_with_its_path() -> None:
    document = {
        "HookParameters": {"save_interval": "0", "reductions": "median", "save_al": "true"},
        "CollectionConfigurations": [
            {"CollectionName": "weights", "CollectionParameters": {"train.end_step": "x"}}
        ],
    }
    with pytest.raises(ConfigErrors) as raised:
        parse_hook_config(document)
    fields = sorted(error.field for error in raised.value)
    assert fields == [
        "CollectionConfigurations[0].CollectionParameters.train.end_step",
        "HookParameters.reductions",
        "HookParameters.save_al",
        "HookParameters.save_interval",
    ]
    misspelt = next(e for e in raised.value if e.field.endswith("save_al"))
    assert misspelt.suggestion == "save_all"


def test_the_file_is_found_by_argument_then_by_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, smdebugs = tmp_path / "ours.json", tmp_path / "smdebug.json"
    ours.write_text(json.dumps({"LocalPath": "from-trainprobe-variable"}))
    smdebugs.write_text(json.dumps({"LocalPath": "from-smdebug-variable"}))
    monkeypatch.delenv("TRAINPROBE_HOOK_CONFIG", raising=False)
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(smdebugs))
    assert read_hook_config().out_dir == "from-smdebug-variable"
    monkeypatch.setenv("TRAINPROBE_HOOK_CONFIG", str(ours))
    assert read_hook_config().out_dir == "from-trainprobe-variable"
    assert find_hook_config(str(smdebugs)) == str(smdebugs)


def test_no_file_is_a_file_not_found_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TRAINPROBE_HOOK_CONFIG", raising=False)
    monkeypatch.delenv("SMDEBUG_CONFIG_FILE_PATH", raising=False)
    if find_hook_config() is not None:
        pytest.skip("this machine has a SageMaker hook configuration file")
    with pytest.raises(FileNotFoundError, match="TRAINPROBE_HOOK_CONFIG"):
        read_hook_config()
    with pytest.raises(FileNotFoundError):
        read_hook_config(str(tmp_path / "missing.json"))
