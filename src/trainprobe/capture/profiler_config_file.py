"""A job's ProfilerConfig file, read once and then watched for changes.

The file holds a ``ProfilerConfig`` request (CreateTrainingJob's shape, with any UpdateTrainingJob
applied: what the job runner writes, and what SageMaker writes to ``profilerconfig.json``). Both
the training's framework profiler and the system monitor watch it, each taking what it needs
from the config; a training finds it with ``find_profiler_config``.

Watching costs one ``stat`` at most every ``check_interval`` seconds and a read only when the
file's modification time, size or inode changed. A file that cannot be read or is not a valid
ProfilerConfig leaves the settings as they were, logged once per version of the file.

The file is read as smdebug reads ``profilerconfig.json``: keys in any case, ``ProfilerEnabled``
as the opposite of ``DisableProfiler``, and keys it does not know left out (logged), so that a
file smdebug accepted is accepted here.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from trainprobe import settings
from trainprobe.config.errors import ConfigError, ConfigErrors, closest
from trainprobe.config.framework_profile import PARAMETER_KEYS
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.storage import files

__all__ = [
    "CONFIG_PATH_VARIABLES",
    "DEFAULT_CONFIG_PATH",
    "ProfilerConfigFile",
    "as_smdebug_reads_it",
    "find_profiler_config",
]

log = logging.getLogger(__name__)

CONFIG_PATH_VARIABLES = (settings.PROFILER_CONFIG, settings.SMPROFILER_CONFIG_PATH)
"""Environment variables naming the file, in the order they are consulted."""

DEFAULT_CONFIG_PATH = "/opt/ml/input/config/profilerconfig.json"
"""Where SageMaker puts the file inside a training container."""

Settings = TypeVar("Settings")

_ENABLED = "profilerenabled"
# CreateTrainingJob's ProfilerConfig members, and SageMaker Profiler's two parameters.
_TOP = {
    key.lower(): key
    for key in ("S3OutputPath", "ProfilingIntervalInMilliseconds", "ProfilingParameters")
}
_TOP["disableprofiler"] = "DisableProfiler"
_PARAMETERS = {
    key.lower(): key for key in (*PARAMETER_KEYS, "CPUProfilingDuration", "SMPFileRotationSecs")
}


def _known_keys(entries: Any, names: dict[str, str], where: str, left_out: list[str]) -> Any:
    if not isinstance(entries, dict):
        return entries  # the parser says what is wrong with it
    kept: dict[str, Any] = {}
    for key, value in entries.items():
        name = names.get(str(key).lower())
        if name is None:
            suggestion = closest(str(key), names.values())
            hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
            left_out.append(f"{where}{key}{hint}")
        else:
            kept[name] = value
    return kept


def _is_no(value: object) -> bool:
    try:
        return not settings.parse_flag(str(value))
    except ValueError:
        return False


def as_smdebug_reads_it(request: Any) -> tuple[Any, list[str]]:
    """``request`` with its keys in SageMaker's spelling and those smdebug ignores left out,
    and the names of those left out."""
    if not isinstance(request, dict):
        return request, []
    left_out: list[str] = []
    enabled = next((v for k, v in request.items() if str(k).lower() == _ENABLED), None)
    request = _known_keys(
        {k: v for k, v in request.items() if str(k).lower() != _ENABLED}, _TOP, "", left_out
    )
    if enabled is not None and "DisableProfiler" not in request:
        request["DisableProfiler"] = _is_no(enabled)
    if "ProfilingParameters" in request:
        request["ProfilingParameters"] = _known_keys(
            request["ProfilingParameters"], _PARAMETERS, "ProfilingParameters.", left_out
        )
    return request, left_out


def find_profiler_config() -> str | None:
    """The ProfilerConfig file this process should use, or None when there is none.

    ``$TRAINPROBE_PROFILER_CONFIG``, else smdebug's ``$SMPROFILER_CONFIG_PATH``, else SageMaker's
    default location.
    """
    for variable in CONFIG_PATH_VARIABLES:
        path = variable.get()
        if path:
            return path if files.exists(path) else None
    return DEFAULT_CONFIG_PATH if files.exists(DEFAULT_CONFIG_PATH) else None


class ProfilerConfigFile(Generic[Settings]):
    """A ProfilerConfig request JSON file, read once and then checked for changes.

    ``settings_of`` turns the file's ``ProfilerConfig`` into what its reader acts on (a
    profiling plan, the monitor's interval); it may raise ConfigErrors. The file is looked at
    (one ``stat``) at most every ``check_interval`` seconds of ``clock``.
    """

    def __init__(
        self,
        path: str,
        settings_of: Callable[[ProfilerConfig], Settings],
        check_interval: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.check_interval = check_interval
        self._settings_of = settings_of
        self._clock = clock
        self._version: tuple[int, int, int] | None = None
        self._next_check = -float("inf")

    def read(self) -> Settings:
        """The settings the file holds now; raises ConfigErrors, or OSError if it cannot be read."""
        self._version = self._stat()
        self._next_check = self._clock() + self.check_interval
        try:
            request = json.loads(files.read_bytes(self.path))
        except ValueError as error:
            raise ConfigErrors(
                [ConfigError(self.path, "(file content)", f"a ProfilerConfig JSON object: {error}")]
            ) from None
        request, left_out = as_smdebug_reads_it(request)
        if left_out:
            log.warning(
                "trainprobe: %s: leaving out what smdebug ignores too: %s",
                self.path,
                ", ".join(left_out),
            )
        return self._settings_of(ProfilerConfig.from_request_dict(request))

    def changed(self) -> Settings | None:
        """The new settings if the file changed since it was last read, else None.

        Does nothing (not even a ``stat``) until ``check_interval`` seconds have passed since
        the last check.
        """
        now = self._clock()
        if now < self._next_check:
            return None
        self._next_check = now + self.check_interval
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
            log.warning(
                "trainprobe: ignoring %s, keeping the current settings: %s", self.path, error
            )
            return None

    def _stat(self) -> tuple[int, int, int]:
        status = os.stat(self.path)
        return status.st_mtime_ns, status.st_size, status.st_ino
