"""What the monitor does (sample or not, how often), and the watched ProfilerConfig file saying so.

The job runner writes a job's ``ProfilerConfig`` request JSON (CreateTrainingJob's shape, with any
UpdateTrainingJob already applied) to a file; the monitor polls the file's status (one ``stat``
per wake-up, no read unless it changed) and applies a new interval or ``DisableProfiler`` without
restarting. A file that cannot be read or is not a valid ProfilerConfig leaves the settings as they
were, logged once per version of the file. An interval the file leaves out is the one given on the
command line.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.profiler_config import (
    ALLOWED_SYSTEM_MONITOR_INTERVALS,
    SYSTEM_MONITOR_INTERVAL_DEFAULT,
    ProfilerConfig,
)
from trainprobe.storage import files

__all__ = ["MonitorSettings", "ProfilerConfigFile", "check_interval"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MonitorSettings:
    """Whether the monitor samples, and every how many milliseconds."""

    enabled: bool = True
    interval_ms: int = SYSTEM_MONITOR_INTERVAL_DEFAULT

    @classmethod
    def from_request(cls, request: Mapping[str, Any], default_interval_ms: int) -> MonitorSettings:
        """The settings a ProfilerConfig request asks for; ConfigErrors name every bad field."""
        config = ProfilerConfig.from_request_dict(request)
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


class ProfilerConfigFile:
    """A ProfilerConfig request JSON file, watched for changes."""

    def __init__(self, path: str, default_interval_ms: int) -> None:
        self.path = path
        self.default_interval_ms = default_interval_ms
        self._version: tuple[int, int, int] | None = None

    def read(self) -> MonitorSettings:
        """The settings the file holds now; raises ConfigErrors, or OSError if it cannot be read."""
        self._version = self._stat()
        try:
            request = json.loads(files.read_bytes(self.path))
        except ValueError as error:
            raise ConfigErrors(
                [ConfigError(self.path, "(file content)", f"a ProfilerConfig JSON object: {error}")]
            ) from None
        return MonitorSettings.from_request(request, self.default_interval_ms)

    def changed(self) -> MonitorSettings | None:
        """The new settings if the file changed since last read, else None."""
        try:
            version = self._stat()
        except OSError:
            return None  # being replaced, or gone: keep the settings we have
        if version == self._version:
            return None
        try:
            return self.read()
        except (OSError, ValueError) as error:
            self._version = version
            log.warning("ignoring %s, keeping the current settings: %s", self.path, error)
            return None

    def _stat(self) -> tuple[int, int, int]:
        status = os.stat(self.path)
        return status.st_mtime_ns, status.st_size, status.st_ino
