"""``PandasFrameAnalysis``: statistics over ``PandasFrame``'s two DataFrames, as smdebug's
``pandas_data_analysis`` computes them.

The profiling notebooks ask, of a job's system and framework frames::

    analysis = PandasFrameAnalysis(system_df, framework_df)
    analysis.get_job_statistics()                            # initialization, loop, finalization
    analysis.get_step_statistics(by=StatsBy.TRAINING_PHASE)  # step durations per mode
    analysis.get_utilization_stats(Resource.CPU, by=StatsBy.TRAINING_PHASE)
    analysis.get_device_usage_stats()                        # readings per utilization range
    analysis.get_training_phase_intervals()                  # before train, train, between...

Like smdebug's it adds columns to the frames it is given (``duration_us``; ``phase`` and
``ranges`` once asked for) and gives each framework event of step -1 the step whose time holds it.
An event that no step holds keeps -1, where smdebug raised IndexError. Durations are
microseconds; argument values of the wrong type are logged and answered with None (or an empty
DataFrame), as smdebug does.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

import pandas as pd

__all__ = ["JobStats", "PandasFrameAnalysis", "Resource", "StatsBy"]

log = logging.getLogger("trainprobe")

_STEP_EVENT = "Step:ModeKeys"
_PERCENTILES = [0.5, 0.95, 0.99]
_STAT_NAMES = ["mean", "min", "max", "50%", "95%", "99%"]


class StatsBy(Enum):
    """What step statistics are grouped by."""

    TRAINING_PHASE = "training_phase"
    FRAMEWORK_METRICS = "framework_metric"
    PROCESS = "process"


class Resource(Enum):
    """A kind of system metric, matched against the system frame's ``type``."""

    CPU = "cpu"
    GPU = "gpu"
    IO = "i/o"
    NETWORK = "network"
    MEMORY = "memory"


_ALL_RESOURCES = [Resource.CPU, Resource.GPU, Resource.MEMORY, Resource.IO, Resource.NETWORK]
"""The resources of ``get_utilization_stats`` by default, in the order of its rows."""


class JobStats(dict):  # type: ignore[type-arg]
    """The job's statistics by name; shown as smdebug shows them, a table of one row per
    statistic in one column (``0``)."""

    def __setitem__(self, key: Any, item: Any) -> None:
        self.__dict__[key] = item

    def __getitem__(self, key: Any) -> Any:
        return self.__dict__[key]

    def __repr__(self) -> str:
        # smdebug's values held a one-row Series or two, which made the column.
        return repr(pd.DataFrame({0: pd.Series(self.__dict__, dtype=object)}))


def _spread(frame: Any, keys: list[Any], value: str) -> Any:
    """Mean, min, max and the 50th, 95th and 99th percentiles of ``value`` per ``keys``."""
    described = frame.groupby(keys)[value].describe(percentiles=_PERCENTILES)
    return described[_STAT_NAMES].reset_index()


class PandasFrameAnalysis:
    """Queries over a job's system and framework DataFrames (see the module docstring)."""

    def __init__(self, system_df: Any, framework_df: Any) -> None:
        self.sys_metrics_df = system_df
        self.framework_metrics_df = framework_df
        framework_df["duration_us"] = framework_df["end_time_us"] - framework_df["start_time_us"]
        self.step_time_df = self._step_times()
        framework_df["step"] = self._steps_of_events()

    def _step_events(self) -> Any:
        frame = self.framework_metrics_df
        return frame[frame["framework_metric"].str.contains(_STEP_EVENT)]

    def _step_times(self) -> Any:
        """Each step's first start and last end, over every process."""
        steps = self._step_events()
        steps = steps[steps["step"] != -1]
        return steps.groupby("step", as_index=False).agg(
            start_time_us=("start_time_us", "min"), end_time_us=("end_time_us", "max")
        )

    def _steps_of_events(self) -> list[int]:
        """Every event's step: its own, else that of the step whose time holds it, else -1."""
        times = self.step_time_df
        found = []
        for step, start, end in zip(
            self.framework_metrics_df["step"],
            self.framework_metrics_df["start_time_us"],
            self.framework_metrics_df["end_time_us"],
            strict=True,
        ):
            if step == -1:
                holding = times[(times["start_time_us"] < start) & (times["end_time_us"] > end)]
                step = holding["step"].iloc[0] if len(holding) else -1
            found.append(int(step))
        return found

    def get_job_statistics(self) -> JobStats:
        """The job's start and end, and how long its initialization (until step 0), training
        loop and finalization (after the last event) took, in microseconds and percent."""
        system, framework = self.sys_metrics_df, self.framework_metrics_df
        first = framework[
            (framework["step"] == 0)
            & framework["framework_metric"].isin(["Step:ModeKeys.TRAIN", "Step:ModeKeys.GLOBAL"])
        ].reset_index(drop=True)
        duration = system["timestamp_us"].max() - system["timestamp_us"].min()
        loop_end_us = framework["end_time_us"].max()
        stats = JobStats()
        stats["start_time"] = system["timestamp"].min()
        stats["end_time"] = system["timestamp"].max()
        stats["job_duration"] = duration
        stats["training_loop_start"] = first["start_time"][0]
        stats["training_loop_end"] = framework["end_time"].max()
        # a number where smdebug's was a Series of one
        stats["training_loop_duration"] = loop_end_us - first["start_time_us"][0]
        stats["initialization"] = first["start_time_us"][0]
        stats["finalization"] = system["timestamp_us"].max() - loop_end_us
        for part, value in (
            ("initialization", stats["initialization"]),
            ("training_loop", stats["training_loop_duration"]),
            ("finalization", stats["finalization"]),
        ):
            stats[f"{part}_%"] = value / duration * 100
        return stats

    def get_step_statistics(self, by: StatsBy = StatsBy.TRAINING_PHASE) -> Any:
        """Mean, min, max, p50, p95 and p99 of step durations per training phase (each step's
        ``Step:ModeKeys.*`` events), per framework metric or per process (each step's span of
        that metric's or process's events). None, logged, when ``by`` is not a StatsBy."""
        if not isinstance(by, StatsBy):
            log.info("%s should be of type StatsBy", by)
            return None
        if by is StatsBy.TRAINING_PHASE:
            events, column = self._step_events(), "framework_metric"
        else:
            events, column = self.framework_metrics_df, by.value
        spans = events.groupby(["step", column], as_index=False).agg(
            start_time_us=("start_time_us", "min"), end_time_us=("end_time_us", "max")
        )
        spans["duration_us"] = spans["end_time_us"] - spans["start_time_us"]
        stats = _spread(spans, [column], "duration_us")
        stats.columns = [
            by.value,
            "duration_mean_us",
            "duration_min_us",
            "duration_max_us",
            "duration_p50_us",
            "duration_p95_us",
            "duration_p99_us",
        ]
        return stats

    def _mark_phases(self, intervals: Any) -> None:
        """Write each system reading's training phase interval into its ``phase`` column."""
        system = self.sys_metrics_df
        for start, end, phase in zip(
            intervals["start_time_us"], intervals["end_time_us"], intervals["phase"], strict=True
        ):
            system.loc[system["timestamp_us"].between(start, end), "phase"] = phase

    def get_utilization_stats(
        self,
        resource: Resource | list[Resource] | None = None,
        by: StatsBy | None = None,
        phase: str | list[str] | None = None,
    ) -> Any:
        """Mean, min, max, p50, p95 and p99 utilization of each resource (all five by default)
        per node; with ``by=StatsBy.TRAINING_PHASE``, per training phase interval too."""
        if by is not None and not isinstance(by, StatsBy):
            log.info("%s should be of type StatsBy", by)
            return None
        if resource is not None and not isinstance(resource, (list, Resource)):
            log.info("%s should be of type list or Resource", resource)
            return None
        chosen = _ALL_RESOURCES if resource is None else resource
        resources = [chosen] if isinstance(chosen, Resource) else chosen
        by_phase = by is StatsBy.TRAINING_PHASE
        if by_phase:
            self._mark_phases(self.get_training_phase_intervals(phase))
        tables = []
        for kind in resources:
            system = self.sys_metrics_df
            readings = system[system["type"].str.contains(kind.value, regex=False)]
            if readings.empty:
                continue
            if by_phase:
                table = _spread(readings, ["phase", "nodeID"], "value")
                table.insert(0, "Resource", kind.value)
            else:
                table = _spread(readings.assign(level_0=kind.value), ["level_0", "nodeID"], "value")
            tables.append(table)
        columns = ["Resource", "nodeID"]
        columns += [f"utilization_{name}" for name in ("mean", "min", "max", "p50", "p95", "p99")]
        if by_phase:
            columns.insert(1, "Training_phase")
        stats = pd.concat(tables).reset_index(drop=True)
        stats.columns = columns
        return stats

    def get_device_usage_stats(
        self,
        device: Resource | list[Resource] | None = None,
        utilization_ranges: list[tuple[float, float]] | None = None,
    ) -> Any:
        """How many readings of each CPU and GPU metric (or of ``device``) fall in each
        utilization range (default: 90-100, 10-90 and 0-10), per node."""
        if device is not None and not isinstance(device, (list, Resource)):
            log.info("%s should be of type list or Resource", device)
            return pd.DataFrame()
        chosen = [Resource.CPU, Resource.GPU] if device is None else device
        kinds = [chosen] if isinstance(chosen, Resource) else chosen
        ranges = (
            [(90, 100), (10, 90), (0, 10)] if utilization_ranges is None else utilization_ranges
        )
        if not isinstance(ranges, list) or not ranges or any(len(pair) != 2 for pair in ranges):
            log.info(
                "utilization_ranges %s should be a non-empty list of (start, end) pairs", ranges
            )
            return pd.DataFrame()

        def range_of(value: Any) -> tuple[float, ...]:
            for start, end in ranges:
                if start <= float(value) <= end:
                    return (start, end)
            return ()

        system = self.sys_metrics_df
        system["ranges"] = [range_of(value) for value in system["value"]]
        placed = system[system["ranges"] != ()]
        if placed.empty:
            return placed
        pattern = "|".join(kind.value for kind in kinds)
        placed = placed[placed["type"].str.contains(pattern)]
        counts = placed.groupby(["type", "nodeID", "ranges"]).size().rename("count").reset_index()
        table = counts.pivot(index=["type", "nodeID"], columns="ranges", values="count")
        return table.fillna(0).reset_index()

    def get_training_phase_intervals(self, phase: str | list[str] | None = None) -> Any:
        """The job split into intervals (``start_time_us, end_time_us, phase``): before the
        first training phase, each run of a phase's steps, between two of them, and after the
        last. ``phase`` (default: every ``Step:ModeKeys.*`` process) chooses the phases."""
        processes = list(self.framework_metrics_df["process"].unique())
        chosen = [name for name in processes if _STEP_EVENT in name] if phase is None else phase
        if isinstance(chosen, str):
            chosen = [chosen]
        if not isinstance(chosen, list):
            log.info("%s should be a list of strings", chosen)
            return None
        chosen = [name for name in chosen if name in processes]
        if not chosen:
            log.info(
                "None of the phase strings matched the phases in the framework metrics DataFrame"
            )
            return None
        events = self.framework_metrics_df
        events = events[events["framework_metric"].isin(chosen)]
        if len(chosen) > 1:
            runs = events["framework_metric"].ne(events["framework_metric"].shift()).cumsum()
            rows = [
                (
                    run["start_time_us"].min(),
                    run["end_time_us"].max(),
                    run["framework_metric"].iloc[0],
                )
                for _, run in events.groupby(runs)
            ]
        else:
            rows = list(
                zip(
                    events["start_time_us"],
                    events["end_time_us"],
                    events["framework_metric"],
                    strict=True,
                )
            )
        system = self.sys_metrics_df
        intervals = [(system["timestamp_us"].min(), rows[0][0] - 1, "Before " + rows[0][2])]
        for (start, end, name), following in zip(rows, [*rows[1:], None], strict=True):
            intervals.append((start, end, name))
            if following is not None:
                between = "Between " + " and ".join(sorted([name, following[2]]))
                intervals.append((end + 1, following[0] - 1, between))
        intervals.append((rows[-1][1] + 1, system["timestamp_us"].max(), "After " + rows[-1][2]))
        return pd.DataFrame(intervals, columns=["start_time_us", "end_time_us", "phase"])
