"""``ProfilerData``: a job's profiler output as pandas DataFrames, by time or step range.

::

    data = ProfilerData("my-job/profiler-output")
    data.system_metrics(start_step=5, end_step=8)      # readings taken while steps 5-7 ran
    data.framework_events(phase="Step:ModeKeys.TRAIN")
    data.steps(mode="TRAIN")                           # step durations per node and mode
    data.top_functions(start_step=9, end_step=10, by="own")
    data.merge_timeline("timeline.json", start_step=5, end_step=8)   # open in Perfetto

Ranges: ``start_us``/``end_us`` (microseconds since the epoch, end excluded) or
``start_step``/``end_step`` (global steps, end excluded), not both; ``mode`` keeps one mode's
steps (a ModeKeys or its name). Every row knows its step: a system reading the step running on
its host when it was taken, a framework event the step it belongs to (see ``output`` for how).
Column names are listed in ``frames``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from trainprobe.analysis.profiling_data import frames
from trainprobe.analysis.profiling_data.merged_timeline import MergedTimeline, merge_timeline
from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.analysis.profiling_data.python_profiles import (
    CPROFILE,
    PYINSTRUMENT,
    PythonProfile,
    add_up,
    read_functions,
)
from trainprobe.analysis.profiling_data.selection import Selection
from trainprobe.config.errors import ConfigError, closest
from trainprobe.config.profiler_config import ProfilerConfig, ProfilingPlan
from trainprobe.storage.modes import ModeKeys

__all__ = ["ProfilerData"]

_ORDER = {"cumulative": "cumulative_s", "own": "own_s"}
_PERCENTILES = (50, 95, 99)


def _known(field: str, value: str | None, known: list[str]) -> None:
    if value is not None and value not in known:
        allowed = f"one of {', '.join(known)}" if known else "a node of the job: it has none yet"
        raise ConfigError(field, value, allowed, suggestion=closest(value, known))


class ProfilerData:
    """The profiler output under ``path`` as DataFrames (see the module docstring).

    ``hosts`` places training processes on system-metric hosts where their names do not
    (``{"12345-myhost": "algo-1"}``); ``plan`` (the job's ProfilerConfig or its ProfilingPlan)
    tells which clock each cProfile profile used. Each call reads what is on disk then, so the
    same object follows a job in progress.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        hosts: Mapping[str, str] | None = None,
        plan: ProfilingPlan | ProfilerConfig | None = None,
    ) -> None:
        if isinstance(plan, ProfilerConfig):
            plan = plan.profiling_plan()
        self.output = ProfilerOutput(os.fspath(path), hosts=hosts, plan=plan)

    @property
    def path(self) -> str:
        """The profiler output directory."""
        return self.output.path

    def system_metrics(
        self,
        start_us: float | None = None,
        end_us: float | None = None,
        *,
        start_step: int | None = None,
        end_step: int | None = None,
        mode: ModeKeys | str | None = None,
        node_id: str | None = None,
    ) -> Any:
        """System readings (of one host, ``algo-<n>``), one row each, with the step running."""
        selection = Selection.of(start_us, end_us, start_step, end_step, mode)
        _known("node_id", node_id, self.output.system_hosts())
        return frames.system_frame(self.output.readings(selection, node_id))

    def framework_events(
        self,
        start_us: float | None = None,
        end_us: float | None = None,
        *,
        start_step: int | None = None,
        end_step: int | None = None,
        mode: ModeKeys | str | None = None,
        node_id: str | None = None,
        phase: str | None = None,
    ) -> Any:
        """Framework events (of one training process or phase), one row each, with steps.

        A time range keeps the events that overlap it; a step range those of its steps.
        """
        selection = Selection.of(start_us, end_us, start_step, end_step, mode)
        _known("node_id", node_id, self.output.framework_nodes())
        return frames.events_frame(self.output.events(selection, node_id, phase))

    def steps(
        self,
        start_step: int | None = None,
        end_step: int | None = None,
        *,
        mode: ModeKeys | str | None = None,
        node_id: str | None = None,
    ) -> Any:
        """Every step of every training process: start, end, duration and data wait."""
        selection = Selection.of(None, None, start_step, end_step, mode)
        _known("node_id", node_id, self.output.framework_nodes())
        spans = [
            span
            for span in self.output.steps().spans(node_id)
            if selection.holds_step(span.step, span.mode)
        ]
        return frames.steps_frame(spans)

    def step_stats(
        self,
        start_step: int | None = None,
        end_step: int | None = None,
        *,
        mode: ModeKeys | str | None = None,
        node_id: str | None = None,
    ) -> Any:
        """Step durations per training process and mode: count, mean, std, min, p50, p95,
        p99 and max, in microseconds."""
        steps = self.steps(start_step, end_step, mode=mode, node_id=node_id)
        groups = steps.groupby(["node_id", "mode"], sort=True)["duration_us"]
        stats = groups.agg(["count", "mean", "std", "min", "max"])
        for percent in _PERCENTILES:
            stats[f"p{percent}"] = groups.quantile(percent / 100)
        columns = ["count", "mean", "std", "min", *[f"p{p}" for p in _PERCENTILES], "max"]
        return stats[columns].add_suffix("_us").rename(columns={"count_us": "count"}).reset_index()

    def python_profiles(
        self,
        start_step: int | None = None,
        end_step: int | None = None,
        *,
        start_us: float | None = None,
        end_us: float | None = None,
        mode: ModeKeys | str | None = None,
        node_id: str | None = None,
    ) -> list[PythonProfile]:
        """The Python profiles that start in the range (by start time).

        A step or mode range leaves out the profiles taken outside steps (before step 0 and
        after the hook closed); all are listed when no range is given.
        """
        selection = Selection.of(start_us, end_us, start_step, end_step, mode)
        return self.output.python_profiles(selection, node_id)

    def python_profiles_frame(
        self,
        start_step: int | None = None,
        end_step: int | None = None,
        *,
        start_us: float | None = None,
        end_us: float | None = None,
        mode: ModeKeys | str | None = None,
        node_id: str | None = None,
    ) -> Any:
        """``python_profiles`` as a DataFrame: node, profiler, timer, start and end, directory."""
        found = self.python_profiles(
            start_step, end_step, start_us=start_us, end_us=end_us, mode=mode, node_id=node_id
        )
        return frames.profiles_frame(found)

    def profile_functions(
        self, profile: PythonProfile, *, by: str = "cumulative", limit: int | None = None
    ) -> Any:
        """Every function of one profile (the ``limit`` first), most time ``by`` first."""
        return frames.functions_frame(read_functions(profile), _order(by), _limit(limit))

    def top_functions(
        self,
        start_step: int | None = None,
        end_step: int | None = None,
        *,
        by: str = "cumulative",
        limit: int | None = 10,
        start_us: float | None = None,
        end_us: float | None = None,
        mode: ModeKeys | str | None = None,
        node_id: str | None = None,
        profiler: str | None = None,
        timer: str | None = None,
    ) -> Any:
        """The functions with the most time over the profiles of a range, summed over them.

        ``by`` is ``cumulative`` (in the function and what it called) or ``own`` (in the
        function itself). Profiles of different profilers or cProfile clocks measure different
        things and are not added up: ask for one ``profiler`` or ``timer``.
        """
        column, count = _order(by), _limit(limit)
        found = self.python_profiles(
            start_step, end_step, start_us=start_us, end_us=end_us, mode=mode, node_id=node_id
        )
        if profiler is not None:
            _known("profiler", profiler, [CPROFILE, PYINSTRUMENT])
            found = [p for p in found if p.profiler == profiler]
        if timer is not None:
            found = [p for p in found if p.timer == timer]
        _one_kind(found)
        return frames.functions_frame(add_up(read_functions(p) for p in found), column, count)

    def merge_timeline(
        self,
        out_file: str | os.PathLike[str],
        start_us: float | None = None,
        end_us: float | None = None,
        *,
        start_step: int | None = None,
        end_step: int | None = None,
        mode: ModeKeys | str | None = None,
    ) -> MergedTimeline:
        """Write one Chrome trace (Perfetto) of the range: system metrics as counters, the
        step timeline and the detailed torch.profiler traces (``merged_timeline``)."""
        selection = Selection.of(start_us, end_us, start_step, end_step, mode)
        return merge_timeline(self.output, os.fspath(out_file), selection)


def _order(by: str) -> str:
    if by in _ORDER:
        return _ORDER[by]
    raise ConfigError("by", by, "'cumulative' or 'own'", suggestion=closest(str(by), list(_ORDER)))


def _limit(limit: int | None) -> int | None:
    if limit is None or (isinstance(limit, int) and not isinstance(limit, bool) and limit > 0):
        return limit
    raise ConfigError("limit", limit, "a number of functions (an integer > 0), or None for all")


def _one_kind(profiles: list[PythonProfile]) -> None:
    """ConfigError when ``profiles`` mix profilers or cProfile clocks."""
    profilers = sorted({p.profiler for p in profiles})
    if len(profilers) > 1:
        raise ConfigError(
            "profiler", None, f"one of {', '.join(profilers)}: the range has profiles of both"
        )
    timers = sorted({p.timer for p in profiles if p.timer is not None})
    if len(timers) > 1:
        raise ConfigError(
            "timer", None, f"one of {', '.join(timers)}: the range has profiles of each clock"
        )
