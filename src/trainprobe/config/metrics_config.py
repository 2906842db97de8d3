"""When each kind of framework profiling runs: a step range or a time range, and its options.

The classes match ``sagemaker.debugger.metrics_config``: ``DetailedProfilingConfig`` (default step
5 for 1 step), ``DataloaderProfilingConfig`` (step 7 for 1 step), ``PythonProfilingConfig`` (steps
9-11 with cProfile; with ``profile_default_steps`` the timer goes total_time, cpu_time, off_cpu_time
in turn), and ``HorovodProfilingConfig`` / ``SMDataParallelProfilingConfig``, which are accepted and
sent on but never acted on. Each takes a step range or a time range, never both.

Beyond the SDK: every problem is reported at once as ConfigErrors (a ValueError), the profiler
and timer may be given as strings (``"cProfile"``, ``"cpu_time"``) as the documentation's examples
do, and ``from_request_value`` reads a sub-config back from a request's ``ProfilingParameters``.
Range keys are read case-insensitively (smdebug lower-cases them), and a duration is read from
``Duration`` (what the SDK writes) or ``DurationInSeconds`` (what smdebug reads).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar, TypeVar

from trainprobe.config.errors import ConfigError, ConfigErrors, closest
from trainprobe.config.profiling_parameters import format_config_text, parse_config_text
from trainprobe.config.regexes import compile_problem

__all__ = [
    "DATALOADER_PROFILING_START_STEP_DEFAULT",
    "DETAILED_PROFILING_START_STEP_DEFAULT",
    "HOROVOD_PROFILING_START_STEP_DEFAULT",
    "PROFILING_NUM_STEPS_DEFAULT",
    "PYTHON_PROFILING_NUM_STEPS_DEFAULT",
    "PYTHON_PROFILING_START_STEP_DEFAULT",
    "SMDATAPARALLEL_PROFILING_START_STEP_DEFAULT",
    "START_STEP_DEFAULT",
    "DataloaderProfilingConfig",
    "DetailedProfilingConfig",
    "HorovodProfilingConfig",
    "MetricsConfigBase",
    "PythonProfiler",
    "PythonProfilingConfig",
    "SMDataParallelProfilingConfig",
    "StepRange",
    "StepWindow",
    "TimeRange",
    "TimeWindow",
    "cProfileTimer",
    "cprofile_timer_at",
]

START_STEP_DEFAULT = 0
PROFILING_NUM_STEPS_DEFAULT = 1
DETAILED_PROFILING_START_STEP_DEFAULT = 5
DATALOADER_PROFILING_START_STEP_DEFAULT = 7
PYTHON_PROFILING_START_STEP_DEFAULT = 9
PYTHON_PROFILING_NUM_STEPS_DEFAULT = 3
HOROVOD_PROFILING_START_STEP_DEFAULT = 13
SMDATAPARALLEL_PROFILING_START_STEP_DEFAULT = 15


class PythonProfiler(Enum):
    """The Python profiler to run: cProfile or Pyinstrument."""

    CPROFILE = "cprofile"
    PYINSTRUMENT = "pyinstrument"


class cProfileTimer(Enum):
    """The clock cProfile measures with; ``DEFAULT`` takes the three in turn over steps 9-11."""

    TOTAL_TIME = "total_time"
    CPU_TIME = "cpu_time"
    OFF_CPU_TIME = "off_cpu_time"
    DEFAULT = "default"


# The API documentation lists the timers as "cpu, off_cpu, total_time".
_TIMER_ALIASES = {"cpu": cProfileTimer.CPU_TIME, "off_cpu": cProfileTimer.OFF_CPU_TIME}


def _python_profiler(value: object) -> PythonProfiler | None:
    if isinstance(value, PythonProfiler):
        return value
    if isinstance(value, str):
        return {p.value: p for p in PythonProfiler}.get(value.strip().lower())
    return None


def _cprofile_timer(value: object) -> cProfileTimer | None:
    if isinstance(value, cProfileTimer):
        return value
    if isinstance(value, str):
        name = value.strip().lower()
        return {t.value: t for t in cProfileTimer}.get(name, _TIMER_ALIASES.get(name))
    return None


@dataclass(frozen=True)
class StepWindow:
    """Profile ``num_steps`` steps from ``start_step``.

    ``start_step`` None means from the step at which the configuration is read (an update sent
    while the job runs, say).
    """

    start_step: int | None
    num_steps: int

    def covers(self, step: int, first_step: int = 0) -> bool:
        """Whether ``step`` is profiled; ``first_step`` stands in for a missing start step."""
        start = first_step if self.start_step is None else self.start_step
        return start <= step < start + self.num_steps


@dataclass(frozen=True)
class TimeWindow:
    """Profile from ``start_unix_time`` for ``duration`` seconds.

    ``start_unix_time`` None means from when the configuration is read; ``duration`` None means
    until the end of the step in progress at the start.
    """

    start_unix_time: float | None
    duration: float | None


class StepRange:
    """A range of steps: ``start_step`` (default 0) and ``num_steps`` (default 1)."""

    def __init__(self, start_step: int | None, num_steps: int | None) -> None:
        if start_step is None:
            start_step = START_STEP_DEFAULT
        elif num_steps is None:
            num_steps = PROFILING_NUM_STEPS_DEFAULT
        self.start_step: int | None = start_step
        self.num_steps = num_steps

    @classmethod
    def _exactly(cls, start_step: int | None, num_steps: int | None) -> StepRange:
        """A range read from a request, whose start may be left to the running job."""
        found = cls(start_step, num_steps)
        found.start_step = start_step
        return found

    def to_json(self) -> dict[str, Any]:
        """The range as the request writes it: ``{"StartStep": 5, "NumSteps": 1}``."""
        found: dict[str, Any] = {}
        if self.start_step is not None:
            found["StartStep"] = self.start_step
        found["NumSteps"] = self.num_steps
        return found

    def window(self) -> StepWindow:
        """The steps profiled, with the defaults smdebug applies."""
        return StepWindow(self.start_step, self.num_steps or PROFILING_NUM_STEPS_DEFAULT)


class TimeRange:
    """A range of time: ``start_unix_time`` (seconds since the epoch) and ``duration`` (seconds)."""

    def __init__(self, start_unix_time: float | None, duration: float | None) -> None:
        self.start_unix_time = start_unix_time
        self.duration = duration

    def to_json(self) -> dict[str, Any]:
        """The range as the SDK writes it: ``{"StartTimeInSecSinceEpoch": t, "Duration": d}``."""
        found: dict[str, Any] = {}
        if self.start_unix_time is not None:
            found["StartTimeInSecSinceEpoch"] = self.start_unix_time
        if self.duration is not None:
            found["Duration"] = self.duration
        return found

    def window(self) -> TimeWindow | None:
        """The time profiled, or None for an empty range (which profiles nothing)."""
        if self.start_unix_time is None and self.duration is None:
            return None
        start = None if self.start_unix_time is None else float(self.start_unix_time)
        return TimeWindow(start, None if self.duration is None else float(self.duration))


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_unix_time(value: object) -> bool:
    if not _is_number(value):
        return False
    try:
        datetime.fromtimestamp(value)  # type: ignore[arg-type]
    except (OverflowError, ValueError, OSError):
        return False
    return True


_RANGE_FIELDS = ("start_step", "num_steps", "start_unix_time", "duration")
_BOTH = (
    "a step range (start step, number of steps) or a time range (start time, duration); "
    "both step and time fields cannot be specified in the metrics config"
)


def _check_range(values: Mapping[str, object], names: Mapping[str, str]) -> list[ConfigError]:
    """Every problem with a range's four values; ``names`` says what to call each field."""
    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "start_step": (lambda v: _is_integer(v) and v >= 0, "an integer >= 0"),
        "num_steps": (lambda v: _is_integer(v) and v > 0, "an integer > 0"),
        "start_unix_time": (_is_unix_time, "a Unix time in seconds"),
        "duration": (lambda v: _is_number(v) and v > 0, "a number of seconds > 0"),
    }
    errors = [
        ConfigError(names[key], values[key], allowed)
        for key, (valid, allowed) in checks.items()
        if values[key] is not None and not valid(values[key])
    ]
    has_steps = values["start_step"] is not None or values["num_steps"] is not None
    has_time = values["start_unix_time"] is not None or values["duration"] is not None
    if has_steps and has_time:
        given = {names[key]: values[key] for key in _RANGE_FIELDS if values[key] is not None}
        errors.append(ConfigError(names["range"], given, _BOTH))
    return errors


_Config = TypeVar("_Config", bound="MetricsConfigBase")

_REQUEST_NAMES = {
    "start_step": "StartStep",
    "num_steps": "NumSteps",
    "start_unix_time": "StartTimeInSecSinceEpoch",
    "range": "",
}
_RANGE_KEYS = ("StartStep", "NumSteps", "StartTimeInSecSinceEpoch", "Duration", "DurationInSeconds")


def _from_text(value: object, integer: bool) -> object:
    """A number written as a string (``"7"``) as the number; anything else as it is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return int(text) if integer or text.lstrip("-").isdigit() else float(text)
    except ValueError:
        return value


class MetricsConfigBase:
    """A named profiling option over a step range or a time range (never both)."""

    _NAME: ClassVar[str] = ""
    _EXTRA_KEYS: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        name: str,
        start_step: int | None,
        num_steps: int | None,
        start_unix_time: float | None,
        duration: float | None,
    ) -> None:
        self._set_range(name, start_step, num_steps, start_unix_time, duration, [])

    def _set_range(
        self,
        name: str,
        start_step: int | None,
        num_steps: int | None,
        start_unix_time: float | None,
        duration: float | None,
        errors: list[ConfigError],
    ) -> None:
        """Check the range, then raise every problem found (``errors`` holds the others)."""
        values = {
            "start_step": start_step,
            "num_steps": num_steps,
            "start_unix_time": start_unix_time,
            "duration": duration,
        }
        errors = errors + _check_range(values, {key: key for key in values} | {"range": ""})
        if errors:
            owner = type(self).__name__
            raise ConfigErrors([error.at(owner) for error in errors])
        self.name = name
        self.range: StepRange | TimeRange
        if start_step is not None or num_steps is not None:
            self.range = StepRange(start_step, num_steps)
        else:
            self.range = TimeRange(start_unix_time, duration)

    def _to_json(self) -> dict[str, Any]:
        return self.range.to_json()

    def to_json_string(self) -> str:
        """The config as the SDK writes it into ``ProfilingParameters`` (not quite JSON)."""
        return format_config_text(self._to_json())

    def window(self) -> StepWindow | TimeWindow | None:
        """The steps or time this option profiles; None when it profiles nothing."""
        return self.range.window()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetricsConfigBase):
            return NotImplemented
        return type(self) is type(other) and self.to_json_string() == other.to_json_string()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.to_json_string()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._to_json()!r})"

    @classmethod
    def from_request_value(cls: type[_Config], value: object, field: str = "") -> _Config:
        """Read this option from its ``ProfilingParameters`` value (text or a dictionary).

        Errors name the keys under ``field``, e.g. ``DetailedProfilingConfig.StartStep``.
        """
        if isinstance(value, Mapping):
            raw: Mapping[str, object] = value
        else:
            raw = parse_config_text(value, field)  # type: ignore[arg-type]
        allowed = _RANGE_KEYS + cls._EXTRA_KEYS
        by_lower = {key.lower(): key for key in allowed}
        fields: dict[str, object] = {}
        errors: list[ConfigError] = []
        for key, item in raw.items():
            known = by_lower.get(str(key).lower())
            if known is None or known in fields:
                why = "each key once" if known else f"one of {', '.join(allowed)}"
                errors.append(ConfigError(str(key), key, why, suggestion=closest(key, allowed)))
                continue
            fields[known] = item
        duration_key = "DurationInSeconds" if "DurationInSeconds" in fields else "Duration"
        if "Duration" in fields and "DurationInSeconds" in fields:
            errors.append(ConfigError("DurationInSeconds", fields[duration_key], "Duration only"))
        values = {
            "start_step": _from_text(fields.get("StartStep"), integer=True),
            "num_steps": _from_text(fields.get("NumSteps"), integer=True),
            "start_unix_time": _from_text(fields.get("StartTimeInSecSinceEpoch"), integer=False),
            "duration": _from_text(fields.get(duration_key), integer=False),
        }
        errors += _check_range(values, _REQUEST_NAMES | {"duration": duration_key})
        found = cls.__new__(cls)
        found.name = cls._NAME
        if values["start_step"] is not None or values["num_steps"] is not None:
            num_steps = values["num_steps"]
            if values["start_step"] is not None and num_steps is None:
                num_steps = PROFILING_NUM_STEPS_DEFAULT
            found.range = StepRange._exactly(values["start_step"], num_steps)  # type: ignore[arg-type]
        else:
            found.range = TimeRange(values["start_unix_time"], values["duration"])  # type: ignore[arg-type]
        errors += found._read_extras(fields)
        if errors:
            raise ConfigErrors([error.at(field) for error in errors])
        return found

    def _read_extras(self, fields: Mapping[str, object]) -> list[ConfigError]:
        """Set this option's own fields from a request; every problem is returned."""
        return []


def _check_default_steps(profile_default_steps: object) -> list[ConfigError]:
    if isinstance(profile_default_steps, bool):
        return []
    return [ConfigError("profile_default_steps", profile_default_steps, "True or False")]


def _with_defaults(
    profile_default_steps: object,
    start_step: int | None,
    num_steps: int | None,
    no_time: bool,
    defaults: tuple[int, int],
) -> tuple[int | None, int | None]:
    """The step range after the SDK's defaults: ``defaults`` when asked for or nothing is given."""
    if profile_default_steps is True or (start_step is None and num_steps is None and no_time):
        return defaults
    return start_step, num_steps


class _RangeOnlyConfig(MetricsConfigBase):
    """An option with nothing but a range, and default steps of its own."""

    _DEFAULTS: ClassVar[tuple[int, int]] = (0, PROFILING_NUM_STEPS_DEFAULT)

    def __init__(
        self,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: float | None = None,
        duration: float | None = None,
        profile_default_steps: bool = False,
    ) -> None:
        errors = _check_default_steps(profile_default_steps)
        no_time = start_unix_time is None and duration is None
        start_step, num_steps = _with_defaults(
            profile_default_steps, start_step, num_steps, no_time, self._DEFAULTS
        )
        self._set_range(self._NAME, start_step, num_steps, start_unix_time, duration, errors)


class DetailedProfilingConfig(_RangeOnlyConfig):
    """Detailed (framework-operator) profiling; by default step 5 for 1 step."""

    _NAME = "DetailedProfilingConfig"
    _DEFAULTS = (DETAILED_PROFILING_START_STEP_DEFAULT, PROFILING_NUM_STEPS_DEFAULT)


class DataloaderProfilingConfig(MetricsConfigBase):
    """Data loader profiling; by default step 7 for 1 step, every event (``metrics_regex``)."""

    _NAME = "DataloaderProfilingConfig"
    _EXTRA_KEYS = ("MetricsRegex",)

    def __init__(
        self,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: float | None = None,
        duration: float | None = None,
        profile_default_steps: bool = False,
        metrics_regex: str = ".*",
    ) -> None:
        errors = _check_default_steps(profile_default_steps)
        start_step, num_steps = _with_defaults(
            profile_default_steps,
            start_step,
            num_steps,
            start_unix_time is None and duration is None,
            (DATALOADER_PROFILING_START_STEP_DEFAULT, PROFILING_NUM_STEPS_DEFAULT),
        )
        problem = _regex_problem(metrics_regex)
        if problem:
            errors.append(ConfigError("metrics_regex", metrics_regex, problem))
        self._set_range(self._NAME, start_step, num_steps, start_unix_time, duration, errors)
        self.metrics_regex = metrics_regex

    def _to_json(self) -> dict[str, Any]:
        return super()._to_json() | {"MetricsRegex": self.metrics_regex}

    def _read_extras(self, fields: Mapping[str, object]) -> list[ConfigError]:
        regex = fields.get("MetricsRegex", ".*")
        self.metrics_regex = regex  # type: ignore[assignment]
        problem = _regex_problem(regex)
        return [ConfigError("MetricsRegex", regex, problem)] if problem else []


def _regex_problem(regex: object) -> str | None:
    if not isinstance(regex, str):
        return "a regular expression"
    problem = compile_problem(regex)
    return None if problem is None else f"a regular expression ({problem})"


_PROFILERS = "'cprofile' or 'pyinstrument' (any case), or a PythonProfiler"
_TIMERS = "'total_time', 'cpu_time', 'off_cpu_time' or 'default', or a cProfileTimer"


class PythonProfilingConfig(MetricsConfigBase):
    """Python profiling with cProfile or Pyinstrument; by default steps 9-11 with cProfile.

    With ``profile_default_steps=True`` the timer is ``cProfileTimer.DEFAULT``: total time, CPU
    time and off-CPU time for steps 9, 10 and 11 in turn. Pyinstrument has no timer.
    """

    _NAME = "PythonProfilingConfig"
    _EXTRA_KEYS = ("ProfilerName", "cProfileTimer")

    def __init__(
        self,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: float | None = None,
        duration: float | None = None,
        profile_default_steps: bool = False,
        python_profiler: PythonProfiler | str = PythonProfiler.CPROFILE,
        cprofile_timer: cProfileTimer | str = cProfileTimer.TOTAL_TIME,
    ) -> None:
        errors = _check_default_steps(profile_default_steps)
        start_step, num_steps = _with_defaults(
            profile_default_steps,
            start_step,
            num_steps,
            start_unix_time is None and duration is None,
            (PYTHON_PROFILING_START_STEP_DEFAULT, PYTHON_PROFILING_NUM_STEPS_DEFAULT),
        )
        if profile_default_steps is True:
            cprofile_timer = cProfileTimer.DEFAULT
        profiler, timer = _python_profiler(python_profiler), _cprofile_timer(cprofile_timer)
        if profiler is None:
            errors.append(ConfigError("python_profiler", python_profiler, _PROFILERS))
        if timer is None:
            errors.append(ConfigError("cprofile_timer", cprofile_timer, _TIMERS))
        self._set_range(self._NAME, start_step, num_steps, start_unix_time, duration, errors)
        self.python_profiler: PythonProfiler = profiler  # type: ignore[assignment]
        self.cprofile_timer = None if profiler is PythonProfiler.PYINSTRUMENT else timer

    def _to_json(self) -> dict[str, Any]:
        found = super()._to_json() | {"ProfilerName": self.python_profiler.value}
        if self.cprofile_timer is not None:
            found["cProfileTimer"] = self.cprofile_timer.value
        return found

    def _read_extras(self, fields: Mapping[str, object]) -> list[ConfigError]:
        errors = []
        profiler = _python_profiler(fields.get("ProfilerName", PythonProfiler.CPROFILE))
        timer = _cprofile_timer(fields.get("cProfileTimer", cProfileTimer.TOTAL_TIME))
        if profiler is None:
            errors.append(ConfigError("ProfilerName", fields["ProfilerName"], _PROFILERS))
        if timer is None:
            errors.append(ConfigError("cProfileTimer", fields["cProfileTimer"], _TIMERS))
        self.python_profiler = profiler or PythonProfiler.CPROFILE
        self.cprofile_timer = None if profiler is PythonProfiler.PYINSTRUMENT else timer
        return errors

    def timer_at(self, step: int) -> cProfileTimer | None:
        """The cProfile timer for ``step`` (None with Pyinstrument); see ``cprofile_timer_at``."""
        return cprofile_timer_at(self.cprofile_timer, step)


def cprofile_timer_at(timer: cProfileTimer | None, step: int) -> cProfileTimer | None:
    """The clock cProfile uses at ``step`` under ``timer``; it differs from ``timer`` for DEFAULT.

    ``DEFAULT`` means total time at step 9, CPU time at 10, off-CPU time at 11, and total time at
    any other step, as smdebug does.
    """
    if timer is not cProfileTimer.DEFAULT:
        return timer
    turns = (cProfileTimer.TOTAL_TIME, cProfileTimer.CPU_TIME, cProfileTimer.OFF_CPU_TIME)
    offset = step - PYTHON_PROFILING_START_STEP_DEFAULT
    return turns[offset] if 0 <= offset < len(turns) else cProfileTimer.TOTAL_TIME


class HorovodProfilingConfig(_RangeOnlyConfig):
    """Horovod profiling (step 13 by default): accepted and sent on, never acted on."""

    _NAME = "HorovodProfilingConfig"
    _DEFAULTS = (HOROVOD_PROFILING_START_STEP_DEFAULT, PROFILING_NUM_STEPS_DEFAULT)


class SMDataParallelProfilingConfig(_RangeOnlyConfig):
    """SageMaker data-parallel profiling (step 15 by default): accepted, never acted on."""

    _NAME = "SMDataParallelProfilingConfig"
    _DEFAULTS = (SMDATAPARALLEL_PROFILING_START_STEP_DEFAULT, PROFILING_NUM_STEPS_DEFAULT)
