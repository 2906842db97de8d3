"""A failing hook never stops the training (unless strict), and refuses bad input up front."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from hook_training import Net, run

import trainprobe.pytorch as smd
from trainprobe.config.errors import ConfigError
from trainprobe.trials import create_trial

EVERY_STEP = smd.SaveConfig(save_interval=1)


def unwritable(tmp_path: Path) -> Path:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the output directory should go")
    return blocker / "out"


def test_an_unwritable_directory_logs_once_and_training_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(unwritable(tmp_path), save_config=EVERY_STEP, save_all=True)
    hook.register_module(model)
    with caplog.at_level(logging.WARNING, logger="trainprobe"):
        seen = run(hook, model, [(smd.modes.TRAIN, 6)])
        hook.close()
    assert len(seen.losses) == 6
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    message = errors[0].getMessage()
    assert "NotADirectoryError" in message or "FileExistsError" in message
    assert "writable" in message and "TRAINPROBE_STRICT" in message
    assert hook.step == 5


def test_strict_mode_raises_into_the_training(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(unwritable(tmp_path), save_config=EVERY_STEP, strict=True)
    hook.register_module(model)
    with pytest.raises(OSError):
        run(hook, model, [(smd.modes.TRAIN, 6)])
        hook.close()


def test_strict_mode_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPROBE_STRICT", "1")
    assert smd.Hook(tmp_path).strict is True
    monkeypatch.setenv("TRAINPROBE_STRICT", "0")
    assert smd.Hook(tmp_path).strict is False


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_a_tensor_that_cannot_be_saved_stops_saving_but_keeps_earlier_steps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(tmp_path, save_config=EVERY_STEP, include_collections=["weights"])
    hook.register_module(model)
    generator = torch.Generator().manual_seed(0)
    with caplog.at_level(logging.WARNING, logger="trainprobe"):
        for step in range(4):
            model(torch.randn(2, 6, generator=generator))
            if step == 2:
                hook.save_tensor("text", torch.zeros(2, dtype=torch.complex32), "weights")
        hook.close()
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 1]
    assert trial.tensor("Net_fc1.weight").value(1).shape == (8, 6)
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_a_finished_run_is_not_appended_to(tmp_path: Path) -> None:
    hook = smd.Hook(tmp_path)
    hook.close()
    assert (tmp_path / "training_job_end.ts").exists()
    with pytest.raises(ConfigError) as raised:
        smd.Hook(tmp_path)
    assert raised.value.field == "out_dir"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"include_workers": "some"}, "include_workers"),
        ({"reduction_config": "min"}, "reduction_config"),
        ({"save_config": 5}, "save_config"),
        ({"include_regex": ["fc1("]}, "Collection('default').include"),
    ],
)
def test_bad_arguments_name_the_argument(
    tmp_path: Path, options: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        smd.Hook(tmp_path, **options)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_a_bad_mode_is_refused(tmp_path: Path) -> None:
    hook = smd.Hook(tmp_path)
    with pytest.raises(ConfigError, match=r"modes\.TRAIN"):
        hook.set_mode("train")  # type: ignore[arg-type]
    hook.set_mode(2)  # type: ignore[arg-type]
    assert hook.mode == smd.modes.EVAL


def test_a_new_collection_without_patterns_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(tmp_path, save_config=EVERY_STEP, include_collections=["weigths"])
    hook.register_module(model)
    with caplog.at_level(logging.WARNING, logger="trainprobe"):
        run(hook, model, [(smd.modes.TRAIN, 2)])
    hook.close()
    warning = [r.getMessage() for r in caplog.records if "weigths" in r.getMessage()]
    assert len(warning) == 1 and "Did you mean 'weights'" in warning[0]
    strict = smd.Hook(tmp_path / "strict", include_collections=["weigths"], strict=True)
    strict_model = Net()
    strict.register_module(strict_model)
    with pytest.raises(ConfigError) as raised:
        strict_model(torch.zeros(1, 6))
    assert raised.value.suggestion == "weights"


def test_dry_run_writes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(tmp_path / "out", save_config=EVERY_STEP, dry_run=True)
    hook.register_module(model)
    with caplog.at_level(logging.INFO, logger="trainprobe"):
        run(hook, model, [(smd.modes.TRAIN, 2)])
        hook.close()
    assert not (tmp_path / "out").exists()
    assert any("would save losses" in r.getMessage() for r in caplog.records)


def test_created_from_a_debug_hook_config_file(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    config = tmp_path / "debughookconfig.json"
    config.write_text(
        json.dumps(
            {
                "LocalPath": str(out),
                "HookParameters": {"save_interval": "2", "reductions": "max,abs_l2_norm"},
                "CollectionConfigurations": [
                    {"CollectionName": "weights", "CollectionParameters": {"save_interval": "3"}},
                    {
                        "CollectionName": "relu_output",
                        "CollectionParameters": {"save_raw_tensor": "true", "reductions": ""},
                    },
                    {"CollectionName": "losses"},
                ],
            }
        )
    )
    hook = smd.Hook.create_from_json_file(str(config))
    assert smd.get_hook() is hook
    torch.manual_seed(0)
    model = Net()
    hook.register_module(model)
    run(hook, model, [(smd.modes.TRAIN, 7)])
    hook.close()
    trial = create_trial(str(out))
    assert trial.tensor_names() == [
        "CrossEntropyLoss_output_0",
        "Net_fc1.weight",
        "Net_fc2.weight",
        "relu_output_0",
    ]
    weight = trial.tensor("Net_fc1.weight")
    assert weight.steps() == [0, 3, 6]
    assert sorted(weight.reduction_values(3)) == [("l2", True), ("max", False)]
    relu = trial.tensor("relu_output_0")
    assert relu.steps() == [0, 2, 4, 6]
    assert relu.value(2).shape == (4, 8)
    assert relu.reduction_values(2) == {}


def test_get_hook_without_a_file_is_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import trainprobe.capture.pytorch.hook as hook_module

    monkeypatch.setattr(hook_module, "_singleton", None)
    monkeypatch.setenv("TRAINPROBE_HOOK_CONFIG", str(tmp_path / "missing.json"))
    assert smd.get_hook(create_if_not_exists=True) is None
    hook = smd.Hook(tmp_path)
    assert smd.get_hook() is hook


def test_sparse_gradients_are_skipped_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4, sparse=True), torch.nn.Linear(4, 2))
    hook = smd.Hook(tmp_path, save_config=EVERY_STEP, include_collections=["gradients"])
    hook.register_module(model)
    with caplog.at_level(logging.WARNING, logger="trainprobe"):
        for _ in range(3):
            model(torch.tensor([1, 2, 3])).sum().backward()
        hook.close()
    warnings = [r.getMessage() for r in caplog.records if "sparse" in r.getMessage()]
    assert len(warnings) == 1 and "gradient/Sequential_0.weight" in warnings[0]
    trial = create_trial(str(tmp_path))
    assert trial.tensor_names() == ["gradient/Sequential_1.bias", "gradient/Sequential_1.weight"]
    assert trial.steps() == [0, 1, 2]
