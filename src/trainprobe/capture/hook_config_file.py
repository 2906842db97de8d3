"""Read a hook configuration file (SageMaker's ``DebugHookConfig`` JSON) into the hook's arguments.

SageMaker writes the training job's ``DebugHookConfig`` into the container as a JSON file, and
the hook reads it::

    {"LocalPath": "/opt/ml/output/tensors",
     "HookParameters": {"save_interval": "100", "reductions": "min,max",
                        "train.save_interval": "50"},
     "CollectionConfigurations": [
        {"CollectionName": "weights", "CollectionParameters": {"eval.save_interval": "10"}}]}

Every value may be a string ("100", "true", "1,2,3"). Step keys (``save_interval``,
``save_steps``, ``start_step``, ``end_step``) may carry a mode prefix (``train.``, ``eval.``,
``predict.``, ``global.``). A collection's parameters override the hook's key by key, per mode:
a collection that sets only ``train.save_interval`` keeps the hook's other settings. The
collections named in ``CollectionConfigurations`` become the hook's ``include_collections``.

The file is found at the path given, else at ``$TRAINPROBE_HOOK_CONFIG``, else at smdebug's
``$SMDEBUG_CONFIG_FILE_PATH``, else at SageMaker's default location.

TensorBoard export is on when the hook parameters ask for it (``export_tensorboard``,
``tensorboard_dir``), and also when SageMaker's ``TensorBoardOutputConfig`` file is present
(``$TENSORBOARD_CONFIG_FILE_PATH``, else SageMaker's default location): ``{"LocalPath": ...}``,
whose ``LocalPath`` is then the TensorBoard directory, as the platform collects it from there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from trainprobe import settings
from trainprobe.capture.collections import CollectionSet
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode, parse_step_list
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.hook_config import check_collection_parameters, check_hook_parameters
from trainprobe.config.true_false import true_or_false
from trainprobe.storage.modes import ModeKeys

__all__ = [
    "CONFIG_PATH_VARIABLES",
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_OUT_DIR",
    "CollectionSettings",
    "HookArguments",
    "find_hook_config",
    "parse_hook_config",
    "read_hook_config",
    "read_tensorboard_config",
]

CONFIG_PATH_VARIABLES = (settings.HOOK_CONFIG, settings.SMDEBUG_CONFIG_FILE_PATH)
"""Environment variables naming the file, in the order they are consulted."""

DEFAULT_CONFIG_PATH = "/opt/ml/input/config/debughookconfig.json"
"""Where SageMaker puts the file inside a training container."""

DEFAULT_OUT_DIR = "/opt/ml/output/tensors"
"""SageMaker's ``LocalPath`` when the file gives none."""


_PREFIXES = {mode: f"{mode.name.lower()}." for mode in ModeKeys}
_STEP_KEYS = ("save_interval", "save_steps", "start_step", "end_step")


@dataclass(frozen=True)
class CollectionSettings:
    """What one ``CollectionConfigurations`` entry sets on a collection."""

    name: str
    include_regex: tuple[str, ...] = ()
    save_config: SaveConfig | None = None
    reduction_config: ReductionConfig | None = None
    save_histogram: bool | None = None

    def apply(self, collections: CollectionSet) -> None:
        """Set these values on the collection of that name (creating it if needed)."""
        collection = collections.get(self.name)
        if self.include_regex:
            collection.include(list(self.include_regex))
        if self.save_config is not None:
            collection.save_config = self.save_config
        if self.reduction_config is not None:
            collection.reduction_config = self.reduction_config
        if self.save_histogram is not None:
            collection.save_histogram = self.save_histogram


@dataclass(frozen=True)
class HookArguments:
    """The hook's constructor arguments read from a file, plus per-collection settings."""

    out_dir: str
    export_tensorboard: bool = False
    tensorboard_dir: str | None = None
    dry_run: bool = False
    reduction_config: ReductionConfig | None = None
    save_config: SaveConfig | None = None
    include_regex: list[str] | None = None
    include_collections: list[str] | None = None
    save_all: bool = False
    include_workers: str = "one"
    collections: tuple[CollectionSettings, ...] = field(default=())
    training_rules: tuple[Mapping[str, Any], ...] = field(default=())
    """The rules the hook runs inside the training (``TrainingRules``: LossSpike,
    GradientNormSpike), as the job configured them."""

    def hook_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of the hook's constructor."""
        return {
            "out_dir": self.out_dir,
            "export_tensorboard": self.export_tensorboard,
            "tensorboard_dir": self.tensorboard_dir,
            "dry_run": self.dry_run,
            "reduction_config": self.reduction_config,
            "save_config": self.save_config,
            "include_regex": self.include_regex,
            "include_collections": self.include_collections,
            "save_all": self.save_all,
            "include_workers": self.include_workers,
        }


def find_hook_config(path: str | None = None) -> str | None:
    """The file to read: ``path``, else the first variable set, else SageMaker's default if present.

    Returns None when no path was given or set and the default file does not exist.
    """
    if path is not None:
        return path
    for variable in CONFIG_PATH_VARIABLES:
        value = variable.get()
        if value:
            return value
    return DEFAULT_CONFIG_PATH if os.path.exists(DEFAULT_CONFIG_PATH) else None


def read_hook_config(
    path: str | None = None, *, default_save_interval: int | None = None
) -> HookArguments:
    """Read and check the file (see ``find_hook_config``); FileNotFoundError if there is none.

    ``default_save_interval`` is the hook's save interval where the file gives none (the
    framework's default: XGBoost's hook saves every 10 rounds); None keeps SageMaker's 500.
    """
    found = find_hook_config(path)
    if found is None:
        variables = " or ".join(f"${variable.name}" for variable in CONFIG_PATH_VARIABLES)
        raise FileNotFoundError(
            f"no hook configuration: pass a path, set {variables}, or create {DEFAULT_CONFIG_PATH}"
        )
    with open(found, encoding="utf-8") as file:
        try:
            document = json.load(file)
        except json.JSONDecodeError as error:
            raise ConfigError(found, error.msg, "a JSON document (DebugHookConfig)") from None
    arguments = parse_hook_config(document, default_save_interval=default_save_interval)
    tensorboard = read_tensorboard_config()
    if tensorboard is None:
        return arguments
    directory = tensorboard or arguments.tensorboard_dir
    return replace(arguments, export_tensorboard=True, tensorboard_dir=directory)


def read_tensorboard_config() -> str | None:
    """The ``LocalPath`` of SageMaker's TensorBoard output file, if the file is present.

    The file is ``$TENSORBOARD_CONFIG_FILE_PATH``, else SageMaker's default location. None when
    it does not exist (no export asked for); "" when it exists without a ``LocalPath`` (export
    into the hook's default directory). A file that is not such JSON is a ConfigError.
    """
    path = settings.TENSORBOARD_CONFIG_FILE_PATH.get()
    if path is None or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        try:
            document = json.load(file)
        except json.JSONDecodeError as error:
            raise ConfigError(path, error.msg, 'a JSON document {"LocalPath": ...}') from None
    if not isinstance(document, Mapping):
        raise ConfigError(path, document, 'a JSON object {"LocalPath": ...}')
    local_path = document.get("LocalPath", "")
    if not isinstance(local_path, str):
        raise ConfigError(f"{path}: LocalPath", local_path, "a directory path")
    return local_path


def _bool(value: object) -> bool:
    return true_or_false(value) is True


def _split(value: object) -> list[str]:
    return [item.strip() for item in str(value).split(",") if item.strip()]


def _step_settings(params: Mapping[str, Any], mode: ModeKeys) -> dict[str, Any]:
    """The step keys of ``params`` for ``mode``: plain keys, overridden by the mode's own."""
    settings: dict[str, Any] = {}
    for prefix in ("", _PREFIXES[mode]):
        for key in _STEP_KEYS:
            if prefix + key in params:
                value = params[prefix + key]
                settings[key] = (
                    parse_step_list(prefix + key, value) if key == "save_steps" else value
                )
    return settings


def _save_config(
    params: Mapping[str, Any], base: Mapping[ModeKeys, Mapping[str, Any]] | None = None
) -> tuple[SaveConfig, dict[ModeKeys, dict[str, Any]]]:
    per_mode = {
        mode: {**(base[mode] if base else {}), **_step_settings(params, mode)} for mode in ModeKeys
    }
    config = SaveConfig(
        mode_save_configs={mode: SaveConfigMode.from_dict(keys) for mode, keys in per_mode.items()}
    )
    return config, per_mode


def _reduction_config(params: Mapping[str, Any]) -> ReductionConfig | None:
    if "reductions" not in params:
        return None
    return ReductionConfig.parse(
        str(params["reductions"]),
        save_raw_tensor=_bool(params.get("save_raw_tensor", False)),
        save_shape=_bool(params.get("save_shape", False)),
    )


def parse_hook_config(
    document: object, *, default_save_interval: int | None = None
) -> HookArguments:
    """The hook's arguments from a parsed ``DebugHookConfig`` document (``default_save_interval``:
    see ``read_hook_config``).

    Raises ConfigErrors naming every bad key or value (by its path in the document).
    """
    if not isinstance(document, Mapping):
        raise ConfigErrors([ConfigError("", document, "a JSON object (DebugHookConfig)")])
    errors: list[ConfigError] = []
    hook_params = document.get("HookParameters") or {}
    errors += [error.at("HookParameters") for error in check_hook_parameters(hook_params)]
    entries = document.get("CollectionConfigurations") or []
    if not isinstance(entries, list):
        errors.append(ConfigError("CollectionConfigurations", entries, "a list"))
        entries = []
    for index, entry in enumerate(entries):
        where = f"CollectionConfigurations[{index}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("CollectionName"), str):
            errors.append(ConfigError(f"{where}.CollectionName", entry, "a collection name"))
            continue
        params = entry.get("CollectionParameters") or {}
        found = check_collection_parameters(params)
        errors += [error.at(f"{where}.CollectionParameters") for error in found]
    training_rules = document.get("TrainingRules") or []
    if not isinstance(training_rules, list) or not all(
        isinstance(rule, Mapping) for rule in training_rules
    ):
        errors.append(ConfigError("TrainingRules", training_rules, "a list of rule objects"))
        training_rules = []
    out_dir = document.get("LocalPath", DEFAULT_OUT_DIR)
    if not isinstance(out_dir, str) or not out_dir or "\0" in out_dir:
        errors.append(ConfigError("LocalPath", out_dir, "a non-empty path without NUL characters"))
    if errors:
        raise ConfigErrors(errors)

    defaults = (
        {mode: {"save_interval": default_save_interval} for mode in ModeKeys}
        if default_save_interval is not None
        else None
    )
    save_config, base_modes = _save_config(hook_params, defaults)
    collections = []
    for entry in entries:
        params = entry.get("CollectionParameters") or {}
        collection_save, _ = _save_config(params, base_modes)
        collections.append(
            CollectionSettings(
                name=entry["CollectionName"],
                include_regex=tuple(_split(params["include_regex"]))
                if "include_regex" in params
                else (),
                save_config=collection_save,
                reduction_config=_reduction_config(params),
                save_histogram=_bool(params["save_histogram"])
                if "save_histogram" in params
                else None,
            )
        )
    return HookArguments(
        out_dir=out_dir,
        export_tensorboard=_bool(hook_params.get("export_tensorboard", False)),
        tensorboard_dir=hook_params.get("tensorboard_dir"),
        reduction_config=_reduction_config(hook_params),
        save_config=save_config,
        include_regex=_split(hook_params["include_regex"])
        if "include_regex" in hook_params
        else None,
        include_collections=[c.name for c in collections] if entries else None,
        save_all=_bool(hook_params.get("save_all", False)),
        include_workers=str(hook_params.get("include_workers", "one")),
        collections=tuple(collections),
        training_rules=tuple(training_rules),
    )
