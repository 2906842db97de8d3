"""What the monitor does (sample or not, how often), as the watched ProfilerConfig file says.

The job runner writes a job's ``ProfilerConfig`` request JSON (CreateTrainingJob's shape, with any
UpdateTrainingJob already applied) to a file; the monitor polls the file's status (one ``stat``
per wake-up, no read unless it changed: ``trainprobe.capture.profiler_config_file``) and applies
a new interval or ``DisableProfiler`` without restarting. A file that cannot be read or is not a
valid ProfilerConfig leaves the settings as they were. An interval the file leaves out is the one
given on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from trainprobe.capture.profiler_config_file import ProfilerConfigFile
from trainprobe.config.errors import ConfigError
from trainprobe.config.profiler_config import (
    ALLOWED_SYSTEM_MONITOR_INTERVALS,
    SYSTEM_MONITOR_INTERVAL_DEFAULT,
    ProfilerConfig,
)

__all__ = ["MonitorSettings", "check_interval", "watch_profiler_config"]


@dataclass(frozen=True)
class MonitorSettings:
    """Whether the monitor samples, and every how many milliseconds."""

    enabled: bool = True
    interval_ms: int = SYSTEM_MONITOR_INTERVAL_DEFAULT

    @classmethod
    def from_config(cls, config: ProfilerConfig, default_interval_ms: int) -> MonitorSettings:
        """The settings ``config`` asks for; ``default_interval_ms`` where it names none."""
        plan = config.profiling_plan()
        interval = config.system_monitor_interval_millis or default_interval_ms
        return cls(enabled=plan.enabled, interval_ms=interval)


def check_interval(interval_ms: object, field: str = "interval_ms") -> int:
    """``interval_ms`` if it is one of SageMaker's monitoring intervals, else a ConfigError."""
    if (
        isinstance(interval_ms, int)
        and not isinstance(interval_ms, bool)
        and interval_ms in ALLOWED_SYSTEM_MONITOR_INTERVALS
    ):
        return interval_ms
    allowed = ", ".join(map(str, ALLOWED_SYSTEM_MONITOR_INTERVALS))
    nearest = None
    if isinstance(interval_ms, (int, float)) and not isinstance(interval_ms, bool):
        nearest = str(min(ALLOWED_SYSTEM_MONITOR_INTERVALS, key=lambda ms: abs(ms - interval_ms)))
    raise ConfigError(field, interval_ms, f"one of {allowed} milliseconds", suggestion=nearest)


def watch_profiler_config(
    path: str, default_interval_ms: int
) -> ProfilerConfigFile[MonitorSettings]:
    """The ProfilerConfig file at ``path``, read as the monitor's settings at every check."""
    return ProfilerConfigFile(
        path, partial(MonitorSettings.from_config, default_interval_ms=default_interval_ms)
    )
