"""Which tensors the hook saves, where it writes them, and where TensorBoard output goes.

``CollectionConfig``, ``DebuggerHookConfig`` and ``TensorBoardOutputConfig`` have the names,
signatures and request dictionaries of ``sagemaker.debugger``'s classes, so a SageMaker user's code
ports by changing the import. Unlike the SDK, they check their parameters when built: a misspelt key
or a value smdebug would reject fails here, naming the key and what is allowed, before any job
starts. ``from_request_dict`` reads the CreateTrainingJob shapes (``DebugHookConfig``,
``TensorBoardOutputConfig``) back into the same objects.

Parameter values are strings in the request, as SageMaker sends them; Python ints and bools are
accepted too. Reductions follow smdebug, not the SDK's docstring: ``median`` is listed there, but
smdebug's hook rejects it, so it is rejected here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trainprobe.config.errors import ConfigError, ConfigErrors, closest
from trainprobe.config.names import check_collection_name
from trainprobe.config.regexes import compile_problem
from trainprobe.config.true_false import true_or_false

__all__ = [
    "COLLECTION_PARAMETERS",
    "HOOK_PARAMETERS",
    "MODES",
    "REDUCTIONS",
    "CollectionConfig",
    "DebuggerHookConfig",
    "TensorBoardOutputConfig",
    "check_collection_parameters",
    "check_hook_parameters",
]

MODES = ("train", "eval", "predict", "global")
"""The mode prefixes a step parameter may carry (``train.save_interval``)."""

_BASE_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod", "l1_norm", "l2_norm")
REDUCTIONS = _BASE_REDUCTIONS + tuple(f"abs_{name}" for name in _BASE_REDUCTIONS)
"""Every name smdebug accepts in a ``reductions`` list."""

_MEDIAN_NOTE = "median is listed in the SDK's docs but smdebug rejects it"

# A checker turns a parameter's value into None (valid) or the text of what is allowed.
_Checker = Callable[[object], "str | None"]


def _as_text(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    return None


def _items(value: object) -> list[str] | None:
    """The comma-separated items of a list value, stripped, as smdebug splits them."""
    text = _as_text(value)
    return None if text is None else [item.strip() for item in text.split(",")]


def _is_count(text: str) -> bool:
    return text.strip().isascii() and text.strip().isdigit()


def _check_count(value: object) -> str | None:
    text = _as_text(value)
    if text is not None and not isinstance(value, bool) and _is_count(text):
        return None
    return "an integer >= 0"


def _check_interval(value: object) -> str | None:
    text = _as_text(value)
    if text is not None and not isinstance(value, bool) and _is_count(text) and int(text) > 0:
        return None
    return "an integer >= 1"


def _check_steps(value: object) -> str | None:
    items = _items(value)
    if items is not None and not isinstance(value, bool) and all(_is_count(i) for i in items):
        return None
    return "comma-separated integers >= 0, e.g. '1,2,3'"


def _check_bool(value: object) -> str | None:
    return None if true_or_false(value) is not None else "'true' or 'false'"


def _check_regexes(value: object) -> str | None:
    if not isinstance(value, str):
        return "comma-separated regular expressions"
    for pattern in _items(value) or []:
        problem = compile_problem(pattern)
        if problem is not None:
            return f"comma-separated regular expressions; {pattern!r} does not compile ({problem})"
    return None


def _check_reductions(value: object) -> str | None:
    items = _items(value) if isinstance(value, str) else None
    if items is None:
        return "comma-separated reduction names"
    unknown = [item for item in items if item and item not in REDUCTIONS]
    if not unknown:
        return None
    allowed = "comma-separated names from " + ", ".join(REDUCTIONS)
    if any(item.removeprefix("abs_") == "median" for item in unknown):
        allowed += f" ({_MEDIAN_NOTE})"
    return f"{allowed}; not {', '.join(map(repr, unknown))}"


def _check_workers(value: object) -> str | None:
    return None if value in ("one", "all") else "'one' or 'all'"


def _check_text(value: object) -> str | None:
    return None if isinstance(value, str) else "a string"


def _with_modes(checkers: Mapping[str, _Checker]) -> dict[str, _Checker]:
    keys = dict(checkers)
    for mode in MODES:
        keys.update({f"{mode}.{key}": check for key, check in _STEP_PARAMETERS.items()})
    return keys


_STEP_PARAMETERS: dict[str, _Checker] = {
    "save_interval": _check_interval,
    "save_steps": _check_steps,
    "start_step": _check_count,
    "end_step": _check_count,
}

COLLECTION_PARAMETERS: dict[str, _Checker] = _with_modes(
    {
        "include_regex": _check_regexes,
        "save_histogram": _check_bool,
        "reductions": _check_reductions,
        "save_raw_tensor": _check_bool,
        "save_shape": _check_bool,
        **_STEP_PARAMETERS,
    }
)
"""The keys a collection's parameters may hold, each with its check."""

HOOK_PARAMETERS: dict[str, _Checker] = _with_modes(
    {
        "save_all": _check_bool,
        "include_regex": _check_regexes,
        "reductions": _check_reductions,
        "save_raw_tensor": _check_bool,
        "save_shape": _check_bool,
        "include_workers": _check_workers,
        "export_tensorboard": _check_bool,
        "tensorboard_dir": _check_text,
        **_STEP_PARAMETERS,
    }
)
"""The keys the hook's parameters may hold, each with its check."""


def _describe(checkers: Mapping[str, _Checker]) -> str:
    plain = [key for key in checkers if "." not in key]
    steps = ", ".join(_STEP_PARAMETERS)
    return f"one of {', '.join(plain)}; {steps} may carry a mode prefix ({'., '.join(MODES)}.)"


def _check_parameters(
    parameters: object, checkers: Mapping[str, _Checker], kind: str
) -> list[ConfigError]:
    """Every problem in a parameter dictionary; fields are the keys themselves."""
    if not isinstance(parameters, Mapping):
        return [ConfigError("", parameters, f"a dictionary of {kind} parameters")]
    errors = []
    for key, value in parameters.items():
        check = checkers.get(key) if isinstance(key, str) else None
        if check is None:
            suggestion = closest(key, checkers) if isinstance(key, str) else None
            errors.append(ConfigError(str(key), key, _describe(checkers), suggestion=suggestion))
            continue
        allowed = check(value)
        if allowed is not None:
            errors.append(ConfigError(key, value, allowed))
    errors += _check_step_order(parameters)
    return errors


def _check_step_order(parameters: Mapping[Any, object]) -> list[ConfigError]:
    errors = []
    for prefix in ("", *(f"{mode}." for mode in MODES)):
        start, end = parameters.get(f"{prefix}start_step"), parameters.get(f"{prefix}end_step")
        both = _check_count(start) is None and _check_count(end) is None
        if both and int(str(end)) < int(str(start)):
            errors.append(
                ConfigError(f"{prefix}end_step", end, f"at least {prefix}start_step ({start})")
            )
    return errors


def check_collection_parameters(parameters: object) -> list[ConfigError]:
    """Every problem in a collection's parameters, each field being the parameter's key."""
    return _check_parameters(parameters, COLLECTION_PARAMETERS, "collection")


def check_hook_parameters(parameters: object) -> list[ConfigError]:
    """Every problem in the hook's parameters, each field being the parameter's key."""
    return _check_parameters(parameters, HOOK_PARAMETERS, "hook")


def _under(prefix: str, errors: Iterable[ConfigError]) -> list[ConfigError]:
    return [error.at(prefix) for error in errors]


def _raise_if_any(errors: list[ConfigError]) -> None:
    if errors:
        raise ConfigErrors(errors)


def _check_keys(request: object, allowed: tuple[str, ...], shape: str) -> list[ConfigError]:
    if not isinstance(request, Mapping):
        return [ConfigError("", request, f"a {shape} object")]
    return [
        ConfigError(str(key), key, f"one of {', '.join(allowed)}", suggestion=closest(key, allowed))
        for key in request
        if key not in allowed
    ]


def _check_path(request: Mapping[str, object], key: str, required: bool) -> list[ConfigError]:
    value = request.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, str) or not value:
        return [ConfigError(key, value, "a non-empty string (a local path or URL)")]
    return []


class CollectionConfig:
    """A named group of tensors to save, and how: regexes, schedule, reductions.

    A built-in name (``weights``, ``losses``, ...) adjusts that collection; a new name creates one,
    which then needs ``include_regex``. Parameter keys may carry a mode prefix
    (``train.save_interval``). Raises ConfigErrors listing every bad parameter.
    """

    def __init__(self, name: str, parameters: dict[str, str] | None = None) -> None:
        errors = _name_errors(name, "name")
        if parameters is not None:
            errors += _under("parameters", check_collection_parameters(parameters))
        # The name says which collection, when it can be shown (not a value nested deep).
        shown = isinstance(name, str) and len(name) <= 256
        where = f"CollectionConfig({name!r})" if shown else "CollectionConfig"
        _raise_if_any(_under(where, errors))
        self.name = name
        self.parameters = parameters

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CollectionConfig):
            raise TypeError(
                "CollectionConfig is only comparable with other CollectionConfig objects."
            )
        return self.name == other.name and self.parameters == other.parameters

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted((self.parameters or {}).items()))))

    def __repr__(self) -> str:
        return f"CollectionConfig(name={self.name!r}, parameters={self.parameters!r})"

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"CollectionName": self.name}
        if self.parameters is not None:
            request["CollectionParameters"] = self.parameters
        return request

    def to_request_dict(self) -> dict[str, Any]:
        """The ``CollectionConfiguration`` object of a request, as the SDK writes it."""
        return self._to_request_dict()

    @classmethod
    def from_request_dict(cls, request: Mapping[str, Any]) -> CollectionConfig:
        """Read a ``CollectionConfiguration`` (CollectionName, CollectionParameters)."""
        errors = _check_keys(request, ("CollectionName", "CollectionParameters"), "collection")
        if isinstance(request, Mapping):
            errors += _name_errors(request.get("CollectionName"), "CollectionName")
            parameters = request.get("CollectionParameters")
            if parameters is not None:
                found = check_collection_parameters(parameters)
                errors += _under("CollectionParameters", found)
        _raise_if_any(errors)
        return cls(request["CollectionName"], _copy(request.get("CollectionParameters")))


def _name_errors(name: object, field: str) -> list[ConfigError]:
    try:
        check_collection_name(name, field)
    except ConfigError as error:
        return [error]
    return []


def _duplicate_collections(names: list[object], field: str) -> list[ConfigError]:
    """An error for each collection named again: a collection is configured once."""
    seen: set[str] = set()
    errors = []
    for index, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if name in seen:
            errors.append(
                ConfigError(
                    f"{field}[{index}]", name, "a collection no earlier configuration names"
                )
            )
        seen.add(name)
    return errors


def _copy(parameters: object) -> Any:
    return dict(parameters) if isinstance(parameters, Mapping) else parameters


class DebuggerHookConfig:
    """Where the hook writes tensors, its global save settings, and the collections to save.

    ``hook_parameters`` hold the defaults every collection inherits (``save_interval``,
    ``include_regex``, ``reductions``, ``save_all``, ``include_workers``, ...); a collection's
    own parameters override them per mode. Raises ConfigErrors listing every bad parameter.
    """

    def __init__(
        self,
        s3_output_path: str | None = None,
        container_local_output_path: str | None = None,
        hook_parameters: dict[str, str] | None = None,
        collection_configs: list[CollectionConfig] | None = None,
    ) -> None:
        errors = _check_python_paths(
            s3_output_path=s3_output_path, container_local_output_path=container_local_output_path
        )
        if hook_parameters is not None:
            errors += _under("hook_parameters", check_hook_parameters(hook_parameters))
        if collection_configs is not None:
            if not isinstance(collection_configs, (list, tuple)):
                errors.append(ConfigError("collection_configs", collection_configs, "a list"))
            else:
                errors += [
                    ConfigError(f"collection_configs[{index}]", item, "a CollectionConfig")
                    for index, item in enumerate(collection_configs)
                    if not isinstance(item, CollectionConfig)
                ]
        _raise_if_any(_under("DebuggerHookConfig", errors))
        self.s3_output_path = s3_output_path
        self.container_local_output_path = container_local_output_path
        self.hook_parameters = hook_parameters
        self.collection_configs = collection_configs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DebuggerHookConfig):
            return NotImplemented
        return self._to_request_dict() == other._to_request_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"DebuggerHookConfig(s3_output_path={self.s3_output_path!r}, "
            f"container_local_output_path={self.container_local_output_path!r}, "
            f"hook_parameters={self.hook_parameters!r}, "
            f"collection_configs={self.collection_configs!r})"
        )

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"S3OutputPath": self.s3_output_path}
        if self.container_local_output_path is not None:
            request["LocalPath"] = self.container_local_output_path
        if self.hook_parameters is not None:
            request["HookParameters"] = self.hook_parameters
        if self.collection_configs is not None:
            request["CollectionConfigurations"] = [
                config._to_request_dict() for config in self.collection_configs
            ]
        return request

    def to_request_dict(self) -> dict[str, Any]:
        """The request's ``DebugHookConfig`` object, as the SDK writes it."""
        return self._to_request_dict()

    @classmethod
    def from_request_dict(cls, request: Mapping[str, Any]) -> DebuggerHookConfig:
        """Read a request's ``DebugHookConfig``; raises ConfigErrors naming every bad field."""
        allowed = ("S3OutputPath", "LocalPath", "HookParameters", "CollectionConfigurations")
        errors = _check_keys(request, allowed, "DebugHookConfig")
        if not isinstance(request, Mapping):
            raise ConfigErrors(errors)
        errors += _check_path(request, "S3OutputPath", required=False)
        errors += _check_path(request, "LocalPath", required=False)
        hook_parameters = request.get("HookParameters")
        if hook_parameters is not None:
            errors += _under("HookParameters", check_hook_parameters(hook_parameters))
        collections: list[CollectionConfig] | None = None
        configurations = request.get("CollectionConfigurations")
        if configurations is not None and not isinstance(configurations, list):
            errors.append(ConfigError("CollectionConfigurations", configurations, "a list"))
        elif configurations is not None:
            collections = []
            for index, item in enumerate(configurations):
                try:
                    collections.append(CollectionConfig.from_request_dict(item))
                except ConfigErrors as found:
                    errors += _under(f"CollectionConfigurations[{index}]", found)
            names = [
                item.get("CollectionName") if isinstance(item, Mapping) else None
                for item in configurations
            ]
            errors += _duplicate_collections(names, "CollectionConfigurations")
        _raise_if_any(errors)
        return cls(
            s3_output_path=request.get("S3OutputPath"),
            container_local_output_path=request.get("LocalPath"),
            hook_parameters=_copy(hook_parameters),
            collection_configs=collections,
        )


def _check_python_paths(**paths: object) -> list[ConfigError]:
    return [
        ConfigError(name, value, "a non-empty string (a local path or URL)")
        for name, value in paths.items()
        if value is not None and (not isinstance(value, str) or not value)
    ]


class TensorBoardOutputConfig:
    """Where TensorBoard-readable output goes: ``s3_output_path`` and the local path it syncs."""

    def __init__(self, s3_output_path: str, container_local_output_path: str | None = None) -> None:
        errors = _check_python_paths(
            s3_output_path=s3_output_path, container_local_output_path=container_local_output_path
        )
        _raise_if_any(_under("TensorBoardOutputConfig", errors))
        self.s3_output_path = s3_output_path
        self.container_local_output_path = container_local_output_path

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorBoardOutputConfig):
            return NotImplemented
        return self._to_request_dict() == other._to_request_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"TensorBoardOutputConfig(s3_output_path={self.s3_output_path!r}, "
            f"container_local_output_path={self.container_local_output_path!r})"
        )

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"S3OutputPath": self.s3_output_path}
        if self.container_local_output_path is not None:
            request["LocalPath"] = self.container_local_output_path
        return request

    def to_request_dict(self) -> dict[str, Any]:
        """The request's ``TensorBoardOutputConfig`` object, as the SDK writes it."""
        return self._to_request_dict()

    @classmethod
    def from_request_dict(cls, request: Mapping[str, Any]) -> TensorBoardOutputConfig:
        """Read a request's ``TensorBoardOutputConfig`` (S3OutputPath required, LocalPath)."""
        errors = _check_keys(request, ("S3OutputPath", "LocalPath"), "TensorBoardOutputConfig")
        if not isinstance(request, Mapping):
            raise ConfigErrors(errors)
        errors += _check_path(request, "S3OutputPath", required=True)
        errors += _check_path(request, "LocalPath", required=False)
        _raise_if_any(errors)
        return cls(request["S3OutputPath"], request.get("LocalPath"))
