"""System monitoring and framework profiling for a job: ``ProfilerConfig`` and what it amounts to.

``ProfilerConfig`` and ``Profiler`` match ``sagemaker.debugger``'s classes and request dictionaries.
Unlike the SDK, the monitoring interval is checked (100, 200, 500, 1000, 5000 or 60000 ms), and
every problem is raised at once as ConfigErrors. ``from_request_dict`` reads CreateTrainingJob's
``ProfilerConfig``; ``from_update_request_dict`` reads UpdateTrainingJob's (where a missing member
means "leave as it is"), and ``updated_by`` applies such an update to a running job's config.

``profiling_plan()`` says what will actually be profiled and when, with SageMaker's defaults
applied: the hook and ``trainprobe validate`` read that, never the raw request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from trainprobe.config.errors import ConfigError, ConfigErrors, closest
from trainprobe.config.framework_profile import (
    PARAMETER_KEYS,
    FrameworkProfile,
    TraceFileSettings,
)
from trainprobe.config.metrics_config import (
    DataloaderProfilingConfig,
    PythonProfiler,
    PythonProfilingConfig,
    StepWindow,
    TimeWindow,
    cprofile_timer_at,
    cProfileTimer,
)

__all__ = [
    "ALLOWED_SYSTEM_MONITOR_INTERVALS",
    "SYSTEM_MONITOR_INTERVAL_DEFAULT",
    "Profiler",
    "ProfilerConfig",
    "ProfilingPlan",
]

ALLOWED_SYSTEM_MONITOR_INTERVALS = (100, 200, 500, 1000, 5000, 60000)
SYSTEM_MONITOR_INTERVAL_DEFAULT = 500

_INTERVALS = "one of " + ", ".join(map(str, ALLOWED_SYSTEM_MONITOR_INTERVALS)) + " milliseconds"
_REQUEST_KEYS = (
    "S3OutputPath",
    "ProfilingIntervalInMilliseconds",
    "ProfilingParameters",
    "DisableProfiler",
)
_PROFILER_KEYS = ("CPUProfilingDuration", "SMPFileRotationSecs")


class Profiler:
    """SageMaker Profiler (the successor to framework profiling): accepted and sent on only.

    trainprobe does not run SageMaker Profiler; a job that asks for it gets system monitoring.
    """

    def __init__(
        self, cpu_profiling_duration: str = "3600", file_rotation_interval: str = "600"
    ) -> None:
        errors = [
            ConfigError(name, value, "a whole number of seconds > 0")
            for name, value in (
                ("cpu_profiling_duration", cpu_profiling_duration),
                ("file_rotation_interval", file_rotation_interval),
            )
            if not _is_seconds(value)
        ]
        if errors:
            raise ConfigErrors([error.at("Profiler") for error in errors])
        self.profiling_parameters = {
            "CPUProfilingDuration": str(cpu_profiling_duration),
            "SMPFileRotationSecs": str(file_rotation_interval),
        }
        self.instanceType = "ml.m5.4xlarge"
        self.volumeSizeInGB = 128

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Profiler):
            return NotImplemented
        return self.profiling_parameters == other.profiling_parameters

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Profiler(cpu_profiling_duration={self.profiling_parameters['CPUProfilingDuration']!r}"
            f", file_rotation_interval={self.profiling_parameters['SMPFileRotationSecs']!r})"
        )

    @classmethod
    def from_request_dict(cls, parameters: Mapping[str, Any]) -> Profiler:
        """Read ``ProfilingParameters`` holding SageMaker Profiler's two settings."""
        by_lower = {key.lower(): key for key in _PROFILER_KEYS}
        values = {by_lower[str(key).lower()]: value for key, value in parameters.items()}
        return cls(
            values.get("CPUProfilingDuration", "3600"),
            values.get("SMPFileRotationSecs", "600"),
        )


def _is_seconds(value: object) -> bool:
    text = str(value).strip() if isinstance(value, (str, int)) else ""
    return not isinstance(value, bool) and text.isdigit() and int(text) > 0


@dataclass(frozen=True)
class ProfilingPlan:
    """What a job profiles and when, with SageMaker's defaults applied.

    A window of None means that option does not run; ``python_profiler`` is None unless Python
    profiling runs. ``python_timer_at(step)`` gives the cProfile clock for a step (it changes from
    step to step under ``cProfileTimer.DEFAULT``).
    """

    enabled: bool = True
    system_monitor_interval_millis: int = SYSTEM_MONITOR_INTERVAL_DEFAULT
    trace_files: TraceFileSettings = field(default_factory=TraceFileSettings)
    detailed: StepWindow | TimeWindow | None = None
    dataloader: StepWindow | TimeWindow | None = None
    dataloader_metrics_regex: str = ".*"
    python: StepWindow | TimeWindow | None = None
    python_profiler: PythonProfiler | None = None
    cprofile_timer: cProfileTimer | None = None

    def python_timer_at(self, step: int) -> cProfileTimer | None:
        """The cProfile clock at ``step``; None when cProfile is not the profiler."""
        if self.python is None or self.python_profiler is not PythonProfiler.CPROFILE:
            return None
        return cprofile_timer_at(self.cprofile_timer, step)


class ProfilerConfig:
    """System monitoring (every ``system_monitor_interval_millis``) and framework profiling."""

    def __init__(
        self,
        s3_output_path: str | None = None,
        system_monitor_interval_millis: int | None = None,
        framework_profile_params: FrameworkProfile | None = None,
        profile_params: Profiler | None = None,
        disable_profiler: bool | None = False,
    ) -> None:
        errors = []
        if s3_output_path is not None and (
            not isinstance(s3_output_path, str) or not s3_output_path
        ):
            errors.append(ConfigError("s3_output_path", s3_output_path, "a path or URL"))
        interval = system_monitor_interval_millis
        if interval is not None and (
            isinstance(interval, bool) or interval not in ALLOWED_SYSTEM_MONITOR_INTERVALS
        ):
            errors.append(ConfigError("system_monitor_interval_millis", interval, _INTERVALS))
        if framework_profile_params is not None and not isinstance(
            framework_profile_params, FrameworkProfile
        ):
            errors.append(
                ConfigError(
                    "framework_profile_params", framework_profile_params, "a FrameworkProfile"
                )
            )
        if profile_params is not None and not isinstance(profile_params, Profiler):
            errors.append(ConfigError("profile_params", profile_params, "a Profiler"))
        elif profile_params is not None and framework_profile_params is not None:
            errors.append(
                ConfigError(
                    "profile_params",
                    profile_params,
                    "None when framework_profile_params is set: "
                    "Profiler will not work when Framework Profiler is ON",
                )
            )
        if disable_profiler is not None and not isinstance(disable_profiler, bool):
            errors.append(ConfigError("disable_profiler", disable_profiler, "True or False"))
        if errors:
            raise ConfigErrors([error.at("ProfilerConfig") for error in errors])
        self.s3_output_path = s3_output_path
        self.system_monitor_interval_millis = system_monitor_interval_millis
        self.framework_profile_params = framework_profile_params
        self.profile_params = profile_params
        self.disable_profiler = disable_profiler

    def _key(self) -> tuple[object, ...]:
        # The output path is not sent when the profiler is off, so it does not count then.
        return (
            None if self.disable_profiler else self.s3_output_path,
            self.system_monitor_interval_millis,
            self.framework_profile_params,
            self.profile_params,
            self.disable_profiler,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProfilerConfig):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ProfilerConfig(s3_output_path={self.s3_output_path!r}, "
            f"system_monitor_interval_millis={self.system_monitor_interval_millis!r}, "
            f"framework_profile_params={self.framework_profile_params!r}, "
            f"profile_params={self.profile_params!r}, "
            f"disable_profiler={self.disable_profiler!r})"
        )

    def _parameters(self) -> dict[str, str] | None:
        if self.profile_params is not None:
            return self.profile_params.profiling_parameters
        if self.framework_profile_params is not None:
            return self.framework_profile_params.profiling_parameters
        return None

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {}
        if self.s3_output_path is not None and self.disable_profiler is False:
            request["S3OutputPath"] = self.s3_output_path
        request["DisableProfiler"] = self.disable_profiler
        if self.system_monitor_interval_millis is not None:
            request["ProfilingIntervalInMilliseconds"] = self.system_monitor_interval_millis
        parameters = self._parameters()
        if parameters is not None:
            request["ProfilingParameters"] = parameters
        return request

    def to_request_dict(self) -> dict[str, Any]:
        """CreateTrainingJob's ``ProfilerConfig``, as the SDK writes it."""
        return self._to_request_dict()

    @classmethod
    def _to_profiler_disabled_request_dict(cls) -> dict[str, Any]:
        """UpdateTrainingJob's ``ProfilerConfig`` that turns the profiler off."""
        return {"DisableProfiler": True}

    def _to_update_request_dict(self) -> dict[str, Any]:
        """UpdateTrainingJob's ``ProfilerConfig``: only what this update sets."""
        request = self._to_request_dict()
        if self.disable_profiler is None:
            del request["DisableProfiler"]
            if self.s3_output_path is not None:
                request["S3OutputPath"] = self.s3_output_path
        return request

    @classmethod
    def from_request_dict(cls, request: Mapping[str, Any]) -> ProfilerConfig:
        """Read CreateTrainingJob's ``ProfilerConfig``; ConfigErrors name every bad field."""
        return cls._read(request, update=False)

    @classmethod
    def from_update_request_dict(cls, request: Mapping[str, Any]) -> ProfilerConfig:
        """Read UpdateTrainingJob's ``ProfilerConfig`` (``ProfilerConfigForUpdate``).

        Members left out stay None (``disable_profiler`` too), meaning "unchanged"; apply the
        result with ``updated_by``.
        """
        return cls._read(request, update=True)

    @classmethod
    def _read(cls, request: Mapping[str, Any], update: bool) -> ProfilerConfig:
        if not isinstance(request, Mapping):
            raise ConfigErrors([ConfigError("", request, "a ProfilerConfig object")])
        errors = [
            ConfigError(
                str(key),
                key,
                f"one of {', '.join(_REQUEST_KEYS)}",
                suggestion=closest(key, _REQUEST_KEYS),
            )
            for key in request
            if key not in _REQUEST_KEYS
        ]
        s3_output_path = request.get("S3OutputPath")
        if s3_output_path is not None and (
            not isinstance(s3_output_path, str) or not s3_output_path
        ):
            errors.append(ConfigError("S3OutputPath", s3_output_path, "a path or URL"))
        interval = request.get("ProfilingIntervalInMilliseconds")
        if interval is not None and (
            isinstance(interval, bool) or interval not in ALLOWED_SYSTEM_MONITOR_INTERVALS
        ):
            errors.append(ConfigError("ProfilingIntervalInMilliseconds", interval, _INTERVALS))
        disable = request.get("DisableProfiler", None if update else False)
        if not update and disable is None:
            disable = False
        if disable is not None and not isinstance(disable, bool):
            errors.append(ConfigError("DisableProfiler", disable, "true or false"))
        framework, profiler = None, None
        if "ProfilingParameters" in request:
            try:
                framework, profiler = _read_parameters(request["ProfilingParameters"])
            except ConfigErrors as found:
                errors += [error.at("ProfilingParameters") for error in found]
        if errors:
            raise ConfigErrors(errors)
        return cls(s3_output_path, interval, framework, profiler, disable)

    def updated_by(self, update: ProfilerConfig) -> ProfilerConfig:
        """This config with an UpdateTrainingJob ``update`` applied (its None members keep ours).

        The output path cannot move once set: the job's profiler output already lives there.
        """
        s3 = self.s3_output_path
        if update.s3_output_path is not None and s3 is not None and update.s3_output_path != s3:
            raise ConfigErrors(
                [
                    ConfigError(
                        "S3OutputPath",
                        update.s3_output_path,
                        f"the profiler output path cannot change once set; it is {s3!r}",
                    )
                ]
            )
        framework, profiler = self.framework_profile_params, self.profile_params
        if update.framework_profile_params is not None or update.profile_params is not None:
            framework, profiler = update.framework_profile_params, update.profile_params
        interval = update.system_monitor_interval_millis or self.system_monitor_interval_millis
        disable = (
            self.disable_profiler if update.disable_profiler is None else update.disable_profiler
        )
        return ProfilerConfig(update.s3_output_path or s3, interval, framework, profiler, disable)

    def profiling_plan(self) -> ProfilingPlan:
        """What this config profiles and when, with SageMaker's defaults applied."""
        interval = self.system_monitor_interval_millis or SYSTEM_MONITOR_INTERVAL_DEFAULT
        if self.disable_profiler:
            return ProfilingPlan(enabled=False, system_monitor_interval_millis=interval)
        if self.framework_profile_params is None:
            return ProfilingPlan(system_monitor_interval_millis=interval)
        framework = self.framework_profile_params
        configs = framework.metrics_configs()
        detailed = configs.get("DetailedProfilingConfig")
        dataloader = configs.get("DataloaderProfilingConfig")
        python = configs.get("PythonProfilingConfig")
        plan = ProfilingPlan(
            system_monitor_interval_millis=interval,
            trace_files=framework.trace_file_settings(),
            detailed=detailed.window() if detailed else None,
            dataloader=dataloader.window() if dataloader else None,
            python=python.window() if python else None,
        )
        if isinstance(dataloader, DataloaderProfilingConfig):
            plan = replace(plan, dataloader_metrics_regex=dataloader.metrics_regex)
        if isinstance(python, PythonProfilingConfig) and plan.python is not None:
            plan = replace(
                plan, python_profiler=python.python_profiler, cprofile_timer=python.cprofile_timer
            )
        return plan


def _read_parameters(
    parameters: object,
) -> tuple[FrameworkProfile | None, Profiler | None]:
    """``ProfilingParameters`` as framework profiling or as SageMaker Profiler settings."""
    if not isinstance(parameters, Mapping):
        raise ConfigErrors([ConfigError("", parameters, "a map of profiling parameters")])
    profiler_keys = {key.lower() for key in _PROFILER_KEYS}
    for_profiler = [key for key in parameters if str(key).lower() in profiler_keys]
    if not for_profiler:
        return FrameworkProfile.from_request_dict(parameters), None
    others = [key for key in parameters if key not in for_profiler]
    if others:
        raise ConfigErrors(
            [
                ConfigError(
                    str(key),
                    key,
                    f"absent alongside {', '.join(for_profiler)}: "
                    "Profiler will not work when Framework Profiler is ON",
                    suggestion=closest(str(key), PARAMETER_KEYS),
                )
                for key in others
            ]
        )
    try:
        return None, Profiler.from_request_dict(parameters)
    except ConfigErrors as found:
        names = {"cpu_profiling_duration": "CPUProfilingDuration"}
        names["file_rotation_interval"] = "SMPFileRotationSecs"
        raise ConfigErrors(
            [
                ConfigError(names[e.field.removeprefix("Profiler.")], e.value, e.allowed)
                for e in found
            ]
        ) from None
