"""Every public module says what it exports, and every error it exports is a TrainprobeError.

As httpx's ``tests/test_exported_members.py``: what a user can import is what ``__all__`` names,
and ``except trainprobe.errors.TrainprobeError`` catches every error trainprobe raises on purpose.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import trainprobe
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.errors import TrainprobeError


def _public_modules() -> list[str]:
    names = [trainprobe.__name__]
    for info in pkgutil.walk_packages(trainprobe.__path__, f"{trainprobe.__name__}."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


MODULES = _public_modules()


def _defines_public_names(module: ModuleType) -> bool:
    return any(
        not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
        for name, value in vars(module).items()
        if inspect.isclass(value) or inspect.isfunction(value)
    )


def test_the_walk_finds_every_layer() -> None:
    for package in ("config", "storage", "capture", "analysis", "rules", "jobs", "report", "cli"):
        assert f"trainprobe.{package}" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    if exported is None:
        assert not _defines_public_names(module), f"{name} defines public names but no __all__"
        return
    missing = [member for member in exported if not hasattr(module, member)]
    assert missing == []
    assert len(set(exported)) == len(exported), f"{name}.__all__ names a member twice"


@pytest.mark.parametrize("name", MODULES)
def test_every_public_exception_is_a_trainprobe_error(name: str) -> None:
    module = importlib.import_module(name)
    public = set(getattr(module, "__all__", ())) | {
        member for member in vars(module) if not member.startswith("_")
    }
    outside = [
        member
        for member in sorted(public)
        if inspect.isclass(value := getattr(module, member))
        and issubclass(value, BaseException)
        and value.__module__.startswith(trainprobe.__name__)
        and not issubclass(value, TrainprobeError)
    ]
    assert outside == []


def test_config_errors_is_caught_as_a_config_error_and_a_value_error() -> None:
    one = ConfigError("ProfilerConfig.system_monitor_interval_millis", 7, "one of 100, 200")
    with pytest.raises(ConfigError) as raised:
        raise ConfigErrors([one, ConfigErrors([one.at("Request")])])
    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, ConfigErrors)
    assert [error.field for error in raised.value] == [
        "ProfilerConfig.system_monitor_interval_millis",
        "Request.ProfilerConfig.system_monitor_interval_millis",
    ]
    assert raised.value.field == one.field
    assert all(error.field.startswith("Outer.") for error in raised.value.at("Outer"))


def test_smdebug_names_are_importable_where_smdebug_users_import_them() -> None:
    from trainprobe import exceptions
    from trainprobe.errors import AnalysisError

    for name in ("TensorUnavailableForStep", "StepUnavailable", "NoMoreData"):
        assert issubclass(getattr(exceptions, name), AnalysisError)
    assert issubclass(exceptions.IndexReaderException, TrainprobeError)
