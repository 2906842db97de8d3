"""The arguments both hooks share are read one way: the PyTorch and the XGBoost hook given the
same out_dir, include_workers, tensorboard_dir and collections behave alike."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import trainprobe.pytorch as smd_pytorch
import trainprobe.xgboost as smd_xgboost
from trainprobe.config.errors import ConfigError
from trainprobe.storage.locations import TRAINING_END_FILE

HOOKS = [smd_pytorch.Hook, smd_xgboost.Hook]


@pytest.fixture(params=HOOKS, ids=["pytorch", "xgboost"])
def make_hook(request: pytest.FixtureRequest) -> Any:
    made: list[Any] = []

    def make(out_dir: object, **arguments: Any) -> Any:
        hook = request.param(out_dir, dry_run=True, **arguments)
        made.append(hook)
        return hook

    yield make
    for hook in made:
        hook.close()


@pytest.mark.parametrize("out_dir", [None, ""])
def test_a_missing_out_dir_is_refused(make_hook: Any, out_dir: object) -> None:
    with pytest.raises(ConfigError, match=r"^out_dir: .* a directory to write the tensors into"):
        make_hook(out_dir)


def test_an_out_dir_holding_a_finished_run_is_refused(make_hook: Any, tmp_path: Path) -> None:
    (tmp_path / TRAINING_END_FILE).write_text("")
    with pytest.raises(ConfigError, match="does not hold a finished run"):
        make_hook(tmp_path)


def test_include_workers_is_one_or_all(make_hook: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^include_workers: 'some' is not valid; 'one' or 'all'"):
        make_hook(tmp_path, include_workers="some")


def test_the_tensorboard_directory_is_given_defaulted_or_none(
    make_hook: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert make_hook(tmp_path / "a").tensorboard_dir is None
    exported = make_hook(tmp_path / "b", export_tensorboard=True)
    assert exported.tensorboard_dir == os.path.join(tmp_path / "b", "tensorboard")
    given = make_hook(tmp_path / "c", tensorboard_dir="~/board")
    assert given.tensorboard_dir == str(tmp_path / "home" / "board")
    assert given.export_tensorboard
    with pytest.raises(ConfigError, match=r"^tensorboard_dir: 5 is not valid"):
        make_hook(tmp_path / "d", tensorboard_dir=5)


def test_regex_and_save_all_add_the_default_and_all_collections(
    make_hook: Any, tmp_path: Path
) -> None:
    hook = make_hook(tmp_path, include_collections="losses", include_regex="fc1", save_all=True)
    assert hook.plan.included[:3] == ["losses", "default", "all"]
    assert "fc1" in hook.get_collection("default").include_regex
    assert ".*" in hook.get_collection("all").include_regex
