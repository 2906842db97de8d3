"""SaveConfig and SaveConfigMode decide which mode steps are saved, with smdebug's semantics.

The expected step lists follow reference/smdebug.md §1.4: save_steps is a union with the
interval, the modulo is on the absolute mode step, end_step is exclusive, and a collection's
open modes come from the hook's config. Where smdebug 1.0.34 is at hand, its own SaveConfigMode
is asked the same questions.
"""

from __future__ import annotations

import json

import pytest

from reference_envs import run_reference
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys


def saved(config: SaveConfigMode, upto: int = 30) -> list[int]:
    return [step for step in range(upto) if config.should_save_step(step)]


def test_the_default_saves_every_500_steps_from_0() -> None:
    config = SaveConfigMode()
    assert [s for s in range(2001) if config.should_save_step(s)] == [0, 500, 1000, 1500, 2000]


def test_save_steps_add_to_the_interval_instead_of_replacing_it() -> None:
    config = SaveConfigMode(save_interval=10, save_steps=[3, 7])
    assert saved(config) == [0, 3, 7, 10, 20]


def test_the_modulo_is_on_the_step_itself_not_the_distance_from_start_step() -> None:
    config = SaveConfigMode(save_interval=100, start_step=150)
    assert [s for s in range(450) if config.should_save_step(s)] == [200, 300, 400]


def test_end_step_is_exclusive_and_listed_steps_ignore_the_range() -> None:
    config = SaveConfigMode(save_interval=5, start_step=5, end_step=20, save_steps=[2, 25])
    assert saved(config) == [2, 5, 10, 15, 25]


def test_values_may_be_strings_as_sagemaker_sends_them() -> None:
    config = SaveConfigMode(save_interval="4", start_step="2", end_step="13", save_steps="1, 3")
    assert saved(config) == [1, 3, 4, 8, 12]
    assert config.to_json_dict() == {
        "save_interval": 4,
        "save_steps": [1, 3],
        "start_step": 2,
        "end_step": 13,
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [("save_interval", 0), ("save_interval", "often"), ("start_step", -1), ("end_step", True)],
)
def test_bad_values_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as raised:
        SaveConfigMode(**{field: value})
    assert raised.value.field == f"SaveConfigMode.{field}"
    assert "integer" in raised.value.allowed


def test_one_schedule_for_every_mode_or_one_per_mode() -> None:
    everywhere = SaveConfig(save_interval=3)
    assert all(everywhere.should_save_step(mode, 6) for mode in ModeKeys)
    per_mode = SaveConfig(
        mode_save_configs={
            ModeKeys.TRAIN: SaveConfigMode(save_interval=2),
            "eval": SaveConfigMode(save_interval=5),
        }
    )
    assert per_mode.should_save_step(ModeKeys.TRAIN, 4)
    assert not per_mode.should_save_step(ModeKeys.EVAL, 4)
    assert per_mode.should_save_step(ModeKeys.EVAL, 5)
    assert not per_mode.is_complete()


def test_open_modes_are_filled_from_the_hooks_config() -> None:
    hook = SaveConfig(save_interval=7)
    collection = SaveConfig(mode_save_configs={ModeKeys.EVAL: SaveConfigMode(save_interval=1)})
    merged = collection.merged_with(hook)
    assert merged.is_complete()
    assert merged.get_save_config(ModeKeys.EVAL) == SaveConfigMode(save_interval=1)
    assert merged.get_save_config(ModeKeys.TRAIN) == SaveConfigMode(save_interval=7)
    collection.merge_default_save_config(hook)
    assert collection == merged


def test_json_round_trip_uses_mode_names() -> None:
    config = SaveConfig(
        mode_save_configs={mode: SaveConfigMode(save_interval=int(mode)) for mode in ModeKeys}
    )
    document = config.to_json_dict()
    assert list(document) == ["TRAIN", "EVAL", "PREDICT", "GLOBAL"]
    assert SaveConfig.from_dict(json.loads(json.dumps(document))) == config


def test_parse_accepts_what_the_hook_accepts() -> None:
    assert SaveConfig.parse(None) == SaveConfig()
    assert SaveConfig.parse(SaveConfigMode(save_interval=2)) == SaveConfig(save_interval=2)
    with pytest.raises(ConfigError):
        SaveConfig.parse(12)


@pytest.mark.slow
def test_smdebug_saves_the_same_steps() -> None:
    cases = [
        {"save_interval": 10, "save_steps": [3, 7]},
        {"save_interval": 100, "start_step": 150},
        {"save_interval": 5, "start_step": 5, "end_step": 20, "save_steps": [2, 25]},
        {"save_interval": 1, "end_step": 4},
    ]
    expected = run_reference(
        "smdebug",
        f"""
        import json
        from smdebug import SaveConfigMode
        cases = {cases!r}
        print(json.dumps([
            [s for s in range(450) if SaveConfigMode(**case).should_save_step(s)]
            for case in cases
        ]))
        """,
    )
    ours = [saved(SaveConfigMode(**case), 450) for case in cases]  # type: ignore[arg-type]
    assert ours == expected
