"""``PandasFrame``: smdebug's profiling DataFrames (``profiler_data_to_pandas``), over trainprobe's
``ProfilerData``.

SageMaker's profiling notebooks read a job's profiler output with::

    frame = PandasFrame(profiler_output_path)
    system_df = frame.get_all_system_metrics()       # timestamp, timestamp_us, value,
                                                     # system_metric, dimension, nodeID, type
    framework_df = frame.get_all_framework_metrics() # start_time, end_time, start_time_us,
                                                     # end_time_us, tid, pid, framework_metric,
                                                     # step, bytes, process, nodeID
    system_df, framework_df = frame.get_profiler_data_by_step(5, 8)

The columns are smdebug's: ``timestamp_us``, ``start_time_us`` and ``end_time_us`` count from the
first system reading (smdebug's ``start_time``), ``timestamp``, ``start_time`` and ``end_time``
are UTC text, ``process`` is the event's phase and ``step`` is the step within its mode
(smdebug's ``step_num``: an evaluation's first step is 0), -1 for an event of no step, and
a framework event's ``nodeID`` puts a SageMaker host first (``algo-1-0`` for ``0-algo-1``).
``ProfilerData`` gives the same readings with every row's step and mode, in trainprobe's names.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from trainprobe.analysis.profiling_data.data import ProfilerData
from trainprobe.analysis.profiling_data.nodes import host_first

__all__ = ["FRAMEWORK_COLUMNS", "SYSTEM_COLUMNS", "PandasFrame"]

SYSTEM_COLUMNS = [
    "timestamp",
    "timestamp_us",
    "value",
    "system_metric",
    "dimension",
    "nodeID",
    "type",
]
FRAMEWORK_COLUMNS = [
    "start_time",
    "end_time",
    "start_time_us",
    "end_time_us",
    "tid",
    "pid",
    "framework_metric",
    "step",
    "bytes",
    "process",
    "nodeID",
]


def _text(us: float) -> str:
    moment = datetime.fromtimestamp(us / 1e6, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S:%f")


def _event_name(name: str, args: Any) -> str:
    if isinstance(args, dict):
        for key in ("layer_name", "name"):
            if isinstance(args.get(key), str):
                return str(args[key])
    return name


def _bytes(args: Any) -> Any:
    return args.get("bytes_fetched", -1) if isinstance(args, dict) else -1


class PandasFrame:
    """A job's profiler output under ``path`` as smdebug's DataFrames (see the module docs).

    ``use_in_memory_cache`` and ``scan_interval`` tuned smdebug's reader and change nothing.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        use_in_memory_cache: bool = False,
        scan_interval: int = 5_000_000_000,
    ) -> None:
        self.path = os.fspath(path).strip()
        self.data = ProfilerData(self.path)
        self.interval = scan_interval

    @property
    def start_time(self) -> float:
        """The first system reading's time (microseconds since the epoch), else the first
        framework event's: what the ``_us`` columns count from."""
        readings = self.data.system_metrics()
        if len(readings):
            return float(readings["timestamp_us"].min())
        events = self.data.framework_events()
        return float(events["start_us"].min()) if len(events) else 0.0

    def _system(self, readings: Any, selected: list[str], start: float) -> Any:
        if selected:
            readings = readings[readings["name"].isin(selected)]
        frame = pd.DataFrame(
            {
                "timestamp": [_text(t) for t in readings["timestamp_us"]],
                "timestamp_us": (readings["timestamp_us"] - start).astype("int64"),
                "value": readings["value"],
                "system_metric": readings["name"],
                "dimension": readings["dimension"],
                "nodeID": readings["node_id"],
                "type": readings["type"],
            },
            columns=SYSTEM_COLUMNS,
        )
        return frame.drop_duplicates().reset_index(drop=True)

    def _framework(self, events: Any, selected: list[str], start: float) -> Any:
        names = [_event_name(n, a) for n, a in zip(events["name"], events["args"], strict=True)]
        frame = pd.DataFrame(
            {
                "start_time": [_text(t) for t in events["start_us"]],
                "end_time": [_text(t) for t in events["end_us"]],
                "start_time_us": (events["start_us"] - start).astype("int64"),
                "end_time_us": (events["end_us"] - start).astype("int64"),
                "tid": events["tid"],
                "pid": events["pid"],
                "framework_metric": names,
                "step": events["mode_step"].fillna(-1).astype("int64"),
                "bytes": [_bytes(a) for a in events["args"]],
                "process": events["phase"],
                "nodeID": [host_first(node) for node in events["node_id"]],
            },
            columns=FRAMEWORK_COLUMNS,
        )
        if selected:
            keep = frame["framework_metric"].isin(selected) | frame["process"].isin(selected)
            frame = frame[keep]
        return frame.drop_duplicates(subset=FRAMEWORK_COLUMNS[:-3]).reset_index(drop=True)

    def get_all_system_metrics(self, selected_system_metrics: list[str] | None = None) -> Any:
        """Every system reading (only those named in ``selected_system_metrics``, if given)."""
        return self._system(
            self.data.system_metrics(), selected_system_metrics or [], self.start_time
        )

    def get_all_framework_metrics(self, selected_framework_metrics: list[str] | None = None) -> Any:
        """Every framework event (only those whose name or phase is selected, if given)."""
        return self._framework(
            self.data.framework_events(), selected_framework_metrics or [], self.start_time
        )

    def get_profiler_data_by_time(
        self,
        start_time_us: float,
        end_time_us: float,
        cache_metrics: bool = False,
        selected_framework_metrics: list[str] | None = None,
        selected_system_metrics: list[str] | None = None,
        get_framework_metrics: bool = True,
        get_system_metrics: bool = True,
    ) -> tuple[Any, Any]:
        """System readings and framework events from ``start_time_us`` up to ``end_time_us``
        (microseconds since the epoch)."""
        start = self.start_time
        system = self._system(
            self.data.system_metrics(start_time_us, end_time_us)
            if get_system_metrics
            else self.data.system_metrics().iloc[0:0],
            selected_system_metrics or [],
            start,
        )
        framework = self._framework(
            self.data.framework_events(start_time_us, end_time_us)
            if get_framework_metrics
            else self.data.framework_events().iloc[0:0],
            selected_framework_metrics or [],
            start,
        )
        return system, framework

    def get_profiler_data_by_step(
        self, start_step: int, end_step: int, cache_metrics: bool = False
    ) -> tuple[Any, Any]:
        """The framework events of steps ``start_step`` to ``end_step`` (both included, as in
        smdebug) and the system readings taken while they ran."""
        framework = self.get_all_framework_metrics()
        framework = framework[framework["step"].between(start_step, end_step)]
        system = self.get_all_system_metrics()
        if len(framework):
            began, ended = framework["start_time_us"].min(), framework["end_time_us"].max()
            system = system[system["timestamp_us"].between(began, ended)]
        else:
            system = system.iloc[0:0]
        return system, framework
