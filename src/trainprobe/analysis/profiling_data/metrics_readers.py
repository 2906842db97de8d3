"""smdebug's metric readers (``LocalSystemMetricsReader``, ``LocalAlgorithmMetricsReader``): the
objects the profiling notebooks hand to the charts.

::

    system = LocalSystemMetricsReader("my-job/profiler-output")
    system.refresh_event_file_list()
    last_us = system.get_timestamp_of_latest_available_file()
    readings = system.get_events(0, last_us)        # type, name, dimension, value, node_id,
                                                    # timestamp (seconds since the epoch)
    framework = LocalAlgorithmMetricsReader("my-job/profiler-output")
    events = framework.get_events(0, last_us)       # smdebug's TraceEvent attributes

Times are microseconds since the epoch unless ``unit`` says otherwise (a ``TimeUnits`` member
or its name). Every call reads what is on disk then, so ``refresh_event_file_list`` has nothing
to do; it is kept for the notebooks that call it. Any URL the storage layer reads is a path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from trainprobe.analysis.profiling_data.nodes import host_first
from trainprobe.config.errors import ConfigError
from trainprobe.storage.system_metrics import SystemMetric, SystemMetricsReader, TimeUnit
from trainprobe.storage.trace_file import TraceEvent, TraceFileReader

__all__ = ["FrameworkEvent", "LocalAlgorithmMetricsReader", "LocalSystemMetricsReader"]

_PER_SECOND = {"SECONDS": 1.0, "MILLISECONDS": 1e3, "MICROSECONDS": 1e6, "NANOSECONDS": 1e9}


def _microseconds(value: float, unit: Any) -> float:
    name = str(getattr(unit, "name", unit)).upper()
    if name not in _PER_SECOND:
        raise ConfigError("unit", unit, f"a TimeUnits member or its name: {list(_PER_SECOND)}")
    return value * 1e6 / _PER_SECOND[name]


@dataclass
class FrameworkEvent:
    """One framework event with the attribute names of smdebug's ``TraceEvent`` (times in
    microseconds since the epoch; ``node_id`` a SageMaker host first, ``algo-1-0``, as there)."""

    event_name: str
    event_phase: str
    start_time: float
    end_time: float
    node_id: str
    pid: int
    tid: int
    event_args: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        """How long the event took, in microseconds."""
        return self.end_time - self.start_time

    @property
    def phase(self) -> str:
        """The trace's event kind: every event read here is complete (``X``)."""
        return "X"

    @classmethod
    def of(cls, event: TraceEvent) -> FrameworkEvent:
        """The event read back from a timeline file."""
        return cls(
            event.name,
            event.phase,
            event.start_us,
            event.end_us,
            host_first(event.node_id),
            event.pid,
            event.tid,
            dict(event.args),
        )


class LocalSystemMetricsReader:
    """The system metrics under a profiler output (see the module docstring)."""

    def __init__(self, trace_root_folder: str, use_in_memory_cache: bool = False) -> None:
        self.trace_root_folder = str(trace_root_folder).strip()
        self._reader = SystemMetricsReader(self.trace_root_folder)

    def refresh_event_file_list(self) -> None:
        """Nothing to do: every read lists the files on disk."""

    def get_timestamp_of_latest_available_file(self) -> int:
        """The time of the newest reading (microseconds since the epoch); 0 before any."""
        last = self._reader.last_timestamp()
        return 0 if last is None else math.ceil(last * 1e6)

    def get_events(
        self,
        start_time: float,
        end_time: float,
        unit: Any = "MICROSECONDS",
        event_type: str | None = None,
    ) -> list[SystemMetric]:
        """The readings from ``start_time`` up to ``end_time`` (of one Type, if given)."""
        start_us, end_us = _microseconds(start_time, unit), _microseconds(end_time, unit)
        readings = self._reader.events(start_us, end_us, TimeUnit.MICROSECONDS)
        return [r for r in readings if event_type is None or r.type == event_type]


class LocalAlgorithmMetricsReader:
    """The framework events (the step timeline) under a profiler output."""

    def __init__(self, trace_root_folder: str, use_in_memory_cache: bool = False) -> None:
        self.trace_root_folder = str(trace_root_folder).strip()
        self._reader = TraceFileReader(self.trace_root_folder)

    def refresh_event_file_list(self) -> None:
        """Nothing to do: every read lists the files on disk."""

    def get_timestamp_of_latest_available_file(self) -> int:
        """When the newest timeline file's last event ended (microseconds); 0 before any."""
        found = self._reader.files()
        return int(found[-1].last_end_us) if found else 0

    def get_events(
        self,
        start_time: float,
        end_time: float,
        unit: Any = "MICROSECONDS",
        event_type: str | None = None,
        file_suffix_filter: list[str] | None = None,
    ) -> list[FrameworkEvent]:
        """The events that overlap ``[start_time, end_time)`` (of one phase, if given)."""
        start_us, end_us = _microseconds(start_time, unit), _microseconds(end_time, unit)
        events = self._reader.events(start_us, end_us, phase=event_type)
        return [FrameworkEvent.of(event) for event in events]
