"""Framework profiling: which options run, over which steps or time, and how traces are written.

``FrameworkProfile`` matches ``sagemaker.debugger.FrameworkProfile``. With no arguments it turns on
every option at its default steps (detailed 5, data loader 7, Python 9-11). A ``start_step`` /
``num_steps`` or ``start_unix_time`` / ``duration`` range applies to every option. Individual
``*_profiling_config`` objects win over that range: only the options given are profiled.

Its state is ``profiling_parameters``, the request's ``ProfilingParameters`` map, exactly as the SDK
builds it; ``from_request_dict`` reads such a map back, checking every entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trainprobe.config.errors import ConfigError, ConfigErrors, closest
from trainprobe.config.metrics_config import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    HorovodProfilingConfig,
    MetricsConfigBase,
    PythonProfilingConfig,
    SMDataParallelProfilingConfig,
    _check_range,
)

__all__ = [
    "ALL_METRIC_CONFIGS",
    "BASE_FOLDER_DEFAULT",
    "CLOSE_FILE_INTERVAL_DEFAULT",
    "FILE_OPEN_FAIL_THRESHOLD_DEFAULT",
    "MAX_FILE_SIZE_DEFAULT",
    "FrameworkProfile",
    "TraceFileSettings",
]

BASE_FOLDER_DEFAULT = "/opt/ml/output/profiler"
MAX_FILE_SIZE_DEFAULT = 10485760
CLOSE_FILE_INTERVAL_DEFAULT = 60
FILE_OPEN_FAIL_THRESHOLD_DEFAULT = 50

ALL_METRIC_CONFIGS: tuple[type[MetricsConfigBase], ...] = (
    DetailedProfilingConfig,
    DataloaderProfilingConfig,
    PythonProfilingConfig,
    HorovodProfilingConfig,
    SMDataParallelProfilingConfig,
)
_CONFIG_CLASSES = {cls._NAME: cls for cls in ALL_METRIC_CONFIGS}

_TRACE_KEYS = (
    "LocalPath",
    "RotateMaxFileSizeInBytes",
    "RotateFileCloseIntervalInSeconds",
    "FileOpenFailThreshold",
)
PARAMETER_KEYS = _TRACE_KEYS + tuple(_CONFIG_CLASSES)
"""The ``ProfilingParameters`` keys framework profiling uses."""


@dataclass(frozen=True)
class TraceFileSettings:
    """Where framework traces go and when a trace file is rotated."""

    local_path: str = BASE_FOLDER_DEFAULT
    file_max_size: int = MAX_FILE_SIZE_DEFAULT
    file_close_interval: float = float(CLOSE_FILE_INTERVAL_DEFAULT)
    file_open_fail_threshold: int = FILE_OPEN_FAIL_THRESHOLD_DEFAULT


def _positive_integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _positive_number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, (int, float)) and 0 < value < float("inf"):
        return float(value)
    return None


_TRACE_CHECKS: dict[str, tuple[Callable[[object], object], str]] = {
    "local_path": (lambda v: v if isinstance(v, str) and v else None, "a non-empty path"),
    "file_max_size": (_positive_integer, "an integer number of bytes > 0"),
    "file_close_interval": (_positive_number, "a number of seconds > 0"),
    "file_open_fail_threshold": (_positive_integer, "an integer > 0"),
}


def _read_trace_settings(
    values: Mapping[str, object], names: Mapping[str, str], errors: list[ConfigError]
) -> TraceFileSettings:
    """The settings in ``values`` (missing ones default); problems go to ``errors``."""
    found: dict[str, Any] = {}
    for key, (read, allowed) in _TRACE_CHECKS.items():
        if key not in values:
            continue
        value = read(values[key])
        if value is None:
            errors.append(ConfigError(names[key], values[key], allowed))
        else:
            found[key] = value
    return TraceFileSettings(**found)


class FrameworkProfile:
    """The framework profiling options of a ProfilerConfig, and how their traces are written."""

    def __init__(
        self,
        local_path: str = BASE_FOLDER_DEFAULT,
        file_max_size: int = MAX_FILE_SIZE_DEFAULT,
        file_close_interval: float = CLOSE_FILE_INTERVAL_DEFAULT,
        file_open_fail_threshold: int = FILE_OPEN_FAIL_THRESHOLD_DEFAULT,
        detailed_profiling_config: DetailedProfilingConfig | None = None,
        dataloader_profiling_config: DataloaderProfilingConfig | None = None,
        python_profiling_config: PythonProfilingConfig | None = None,
        horovod_profiling_config: HorovodProfilingConfig | None = None,
        smdataparallel_profiling_config: SMDataParallelProfilingConfig | None = None,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: float | None = None,
        duration: float | None = None,
    ) -> None:
        errors: list[ConfigError] = []
        trace = {
            "local_path": local_path,
            "file_max_size": file_max_size,
            "file_close_interval": file_close_interval,
            "file_open_fail_threshold": file_open_fail_threshold,
        }
        # In Python, as in the SDK, the numbers must be numbers; a request writes them as text.
        numbers = {key: value for key, value in trace.items() if key != "local_path"}
        errors += [
            ConfigError(key, value, _TRACE_CHECKS[key][1])
            for key, value in numbers.items()
            if isinstance(value, str)
        ]
        checked = {key: value for key, value in trace.items() if not isinstance(value, str)}
        checked["local_path"] = local_path
        _read_trace_settings(checked, {key: key for key in trace}, errors)
        given = {
            "detailed_profiling_config": detailed_profiling_config,
            "dataloader_profiling_config": dataloader_profiling_config,
            "python_profiling_config": python_profiling_config,
            "horovod_profiling_config": horovod_profiling_config,
            "smdataparallel_profiling_config": smdataparallel_profiling_config,
        }
        configs: list[MetricsConfigBase] = []
        for (name, option), cls in zip(given.items(), ALL_METRIC_CONFIGS, strict=True):
            if option is not None and not isinstance(option, cls):
                errors.append(ConfigError(name, option, f"a {cls.__name__}"))
            elif option is not None:
                configs.append(option)
        has_range = any(v is not None for v in (start_step, num_steps, start_unix_time, duration))
        if not configs and has_range:
            values = {
                "start_step": start_step,
                "num_steps": num_steps,
                "start_unix_time": start_unix_time,
                "duration": duration,
            }
            errors += _check_range(values, {key: key for key in values} | {"range": ""})
            if not errors:
                configs = [
                    cls(start_step, num_steps, start_unix_time, duration)  # type: ignore[call-arg]
                    for cls in ALL_METRIC_CONFIGS
                ]
        elif not configs and not errors:
            configs = [cls(profile_default_steps=True) for cls in ALL_METRIC_CONFIGS]  # type: ignore[call-arg]
        if errors:
            raise ConfigErrors([error.at("FrameworkProfile") for error in errors])
        self.profiling_parameters: dict[str, str] = {
            "LocalPath": local_path,
            "RotateMaxFileSizeInBytes": str(file_max_size),
            "RotateFileCloseIntervalInSeconds": str(file_close_interval),
            "FileOpenFailThreshold": str(file_open_fail_threshold),
        }
        for config in configs:
            self.profiling_parameters[config.name] = config.to_json_string()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrameworkProfile):
            return NotImplemented
        return self.profiling_parameters == other.profiling_parameters

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FrameworkProfile.from_request_dict({self.profiling_parameters!r})"

    def trace_file_settings(self) -> TraceFileSettings:
        """Where traces go and when files rotate, with defaults for what is not set."""
        return self._read()[0]

    def metrics_configs(self) -> dict[str, MetricsConfigBase]:
        """The options that are profiled, by their ``ProfilingParameters`` name."""
        return self._read()[1]

    def _read(self) -> tuple[TraceFileSettings, dict[str, MetricsConfigBase]]:
        return _read_parameters(self.profiling_parameters)

    @classmethod
    def from_request_dict(cls, parameters: Mapping[str, Any]) -> FrameworkProfile:
        """Read a request's ``ProfilingParameters``; raises ConfigErrors naming each bad entry.

        Keys are matched without regard to case (``DataLoaderProfilingConfig`` is read as
        ``DataloaderProfilingConfig``); a sub-config given as text is kept as it was sent (valid
        JSON or the SDK's form), one given as an object is written as the SDK writes it.
        """
        configs = _read_parameters(parameters)[1]
        canonical = _canonical_keys(parameters, [])
        found = cls.__new__(cls)
        found.profiling_parameters = {}
        for key, value in parameters.items():
            name = canonical[key]
            if name in configs and not isinstance(value, str):
                found.profiling_parameters[name] = configs[name].to_json_string()
            else:
                found.profiling_parameters[name] = value if isinstance(value, str) else str(value)
        return found


def _canonical_keys(parameters: Mapping[str, Any], errors: list[ConfigError]) -> dict[str, str]:
    """Each known key's canonical spelling; the others go to ``errors``."""
    by_lower = {key.lower(): key for key in PARAMETER_KEYS}
    canonical: dict[str, str] = {}
    for key in parameters:
        name = by_lower.get(str(key).lower())
        if name is None or name in canonical.values():
            allowed = "each key once" if name else f"one of {', '.join(PARAMETER_KEYS)}"
            errors.append(
                ConfigError(str(key), key, allowed, suggestion=closest(str(key), PARAMETER_KEYS))
            )
        else:
            canonical[key] = name
    return canonical


_REQUEST_TRACE_NAMES = dict(zip(_TRACE_CHECKS, _TRACE_KEYS, strict=True))


def _read_parameters(
    parameters: Mapping[str, Any],
) -> tuple[TraceFileSettings, dict[str, MetricsConfigBase]]:
    """The typed contents of a ``ProfilingParameters`` map; every problem raised at once."""
    if not isinstance(parameters, Mapping):
        raise ConfigErrors([ConfigError("", parameters, "a map of profiling parameters")])
    errors: list[ConfigError] = []
    canonical = _canonical_keys(parameters, errors)
    by_name = {canonical[key]: value for key, value in parameters.items() if key in canonical}
    trace = {
        key: by_name[request_key]
        for key, request_key in _REQUEST_TRACE_NAMES.items()
        if request_key in by_name
    }
    settings = _read_trace_settings(trace, _REQUEST_TRACE_NAMES, errors)
    configs: dict[str, MetricsConfigBase] = {}
    for name, config_class in _CONFIG_CLASSES.items():
        if name not in by_name:
            continue
        try:
            configs[name] = config_class.from_request_value(by_name[name], name)
        except ConfigError as error:
            errors.append(error)
    if errors:
        raise ConfigErrors(errors)
    return settings, configs
