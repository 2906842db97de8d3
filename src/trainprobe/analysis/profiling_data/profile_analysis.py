"""smdebug's Python profile analysis (``cProfileAnalysis``, ``PyinstrumentAnalysis``) over the
Python profiles the framework profiler wrote.

The profiling notebooks ask::

    analysis = cProfileAnalysis(local_profile_dir="my-job/profiler-output")
    analysis.list_profile_stats()                                  # one row per profile
    stats = analysis.fetch_profile_stats_by_step(9, 10)             # steps 9 to 10, added up
    stats.print_top_n_functions(Metrics.CUMULATIVE_TIME, n=10)
    analysis.fetch_profile_stats_by_step(9, start_phase=StepPhase.STEP_START,
                                         end_phase=StepPhase.FORWARD_PASS_END)
    analysis.fetch_profile_stats_by_training_phase()               # {(start mode, end mode): stats}
    analysis.fetch_profile_stats_by_job_phase()                    # initialization, loop, end

``local_profile_dir`` may be the profiler output, its ``framework`` folder, or one profiler's
folder (``framework/pytorch/cprofile``) as smdebug's reader took it; ``s3_path`` (any URL the
storage layer reads) copies the profiles into ``local_profile_dir/python_stats`` first.
cProfile results are ``pstats.Stats`` added up over the chosen profiles; pyinstrument results are
one ``PyinstrumentStepStats`` (its HTML page and JSON) per profile.
"""

from __future__ import annotations

import json
import os
import posixpath
import pstats
import shutil
from collections.abc import Callable
from enum import Enum, IntEnum
from typing import Any

from trainprobe.analysis.profiling_data.python_profiles import (
    CPROFILE,
    PYINSTRUMENT,
    PythonProfile,
    list_python_profiles,
)
from trainprobe.config.errors import ConfigError
from trainprobe.storage import files
from trainprobe.storage.job_layout import FRAMEWORK_METRICS_DIR

__all__ = [
    "Metrics",
    "PyinstrumentAnalysis",
    "PyinstrumentStepStats",
    "PythonProfileAnalysis",
    "PythonProfileModes",
    "StepPhase",
    "StepPythonProfileStats",
    "cProfileAnalysis",
    "cProfileFunctionStats",
    "cProfileStats",
    "python_profile_mode_to_str",
    "str_to_python_profile_mode",
]


class PythonProfileModes(IntEnum):
    """The mode a profile starts or ends in; before step 0 and after the hook closed too."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4
    PRE_STEP_ZERO = 5
    POST_HOOK_CLOSE = 6


_MODE_NAMES = {
    PythonProfileModes.TRAIN: "train",
    PythonProfileModes.EVAL: "eval",
    PythonProfileModes.PREDICT: "predict",
    PythonProfileModes.GLOBAL: "global",
    PythonProfileModes.PRE_STEP_ZERO: "prestepzero",
    PythonProfileModes.POST_HOOK_CLOSE: "posthookclose",
}
_MODES = {name: mode for mode, name in _MODE_NAMES.items()}


def str_to_python_profile_mode(mode_str: str) -> PythonProfileModes:
    """The mode a profile's folder name gives (``train``, ``prestepzero``...)."""
    if mode_str not in _MODES:
        raise ConfigError("mode_str", mode_str, f"a profile's mode: one of {list(_MODES)}")
    return _MODES[mode_str]


def python_profile_mode_to_str(mode: PythonProfileModes) -> str:
    """A mode's name in a profile's folder name."""
    return _MODE_NAMES[PythonProfileModes(mode)]


class StepPhase(Enum):
    """Where in a step a profile starts or ends."""

    START = "start"
    STEP_START = "stepstart"
    FORWARD_PASS_END = "forwardpassend"
    STEP_END = "stepend"
    END = "end"


class Metrics(Enum):
    """What ``print_top_n_functions`` sorts by (pstats' sort keys)."""

    TOTAL_TIME = "tottime"
    CUMULATIVE_TIME = "cumtime"
    PRIMITIVE_CALLS = "pcalls"
    TOTAL_CALLS = "ncalls"


class StepPythonProfileStats:
    """One profile's segment (modes, steps, phases, times) and its statistics file."""

    def __init__(self, profile: PythonProfile, stats_path: str) -> None:
        self.profiler_name = profile.profiler
        self.framework = profile.framework
        self.node_id = profile.node_id
        self.start_mode = str_to_python_profile_mode(profile.start.mode)
        self.start_step: float = -1 if profile.start.step is None else profile.start.step
        self.start_phase = StepPhase(profile.start.phase)
        self.start_time_since_epoch_in_micros = profile.start.time_us
        self.end_mode = str_to_python_profile_mode(profile.end.mode)
        self.end_step: float = float("inf") if profile.end.step is None else profile.end.step
        self.end_phase = StepPhase(profile.end.phase)
        self.end_time_since_epoch_in_micros = profile.end.time_us
        self.stats_path = stats_path

    def has_start_and_end_mode(self, start_mode: Any, end_mode: Any) -> bool:
        """Whether the profile starts in ``start_mode`` and ends in ``end_mode``."""
        return bool(self.start_mode == start_mode and self.end_mode == end_mode)

    def in_time_interval(self, start_us: float, end_us: float) -> bool:
        """Whether the profile starts or ends within ``[start_us, end_us]``."""
        return bool(
            start_us <= self.start_time_since_epoch_in_micros <= end_us
            or start_us <= self.end_time_since_epoch_in_micros <= end_us
        )

    def in_step_interval(
        self, start_step: int, end_step: int, start_phase: StepPhase, end_phase: StepPhase
    ) -> bool:
        """Whether the profile lies within steps ``start_step`` to ``end_step``: on a boundary
        step, a profile starting after the step's start (or ending before its start) counts
        only when it starts (ends) at the phase asked for."""
        if start_step < self.start_step and end_step > self.end_step:
            return True
        if start_step > self.start_step or end_step < self.end_step:
            return False
        late_start = start_phase in (StepPhase.STEP_END, StepPhase.FORWARD_PASS_END)
        if start_step == self.start_step and late_start and self.start_phase != start_phase:
            return False
        early_end = end_phase == StepPhase.STEP_START
        return not (end_step == self.end_step and early_end and self.end_phase != end_phase)

    def has_pre_step_zero_profile_stats(self) -> bool:
        """Whether the profile runs from the start of the script."""
        return self.start_phase == StepPhase.START

    def has_post_hook_close_profile_stats(self) -> bool:
        """Whether the profile runs to the end of the script."""
        return self.end_phase == StepPhase.END

    def has_node_id(self, node_id: str) -> bool:
        """Whether the profile is of training process ``node_id``."""
        return self.node_id == node_id

    def __repr__(self) -> str:
        return repr(self.__dict__)


def _function_name(key: tuple[str, int, str]) -> str:
    """pstats' text for a function: ``file:line(name)``."""
    namer: Any = getattr(pstats, "func_std_string")  # noqa: B009 (untyped in typeshed)
    return str(namer(key))


class cProfileFunctionStats:
    """One function's calls and times (seconds) in cProfile statistics."""

    def __init__(self, key: tuple[str, int, str], value: tuple[Any, ...]) -> None:
        self.function_name = _function_name(key)
        self.prim_calls, self.total_calls, self.total_time, self.cumulative_time, callers = value
        self.callers = [_function_name(caller) for caller in callers]

    def __repr__(self) -> str:
        return repr(
            {
                "function name": self.function_name,
                "# of primitive calls": self.prim_calls,
                "# of total calls": self.total_calls,
                "total time": self.total_time,
                "cumulative time": self.cumulative_time,
            }
        )


class cProfileStats:
    """cProfile statistics of one or more profiles: ``ps`` (``pstats.Stats``) and one
    ``cProfileFunctionStats`` per function."""

    def __init__(self, ps: pstats.Stats) -> None:
        self.ps = ps
        table: dict[Any, Any] = getattr(ps, "stats", {})
        self.function_stats_list = [cProfileFunctionStats(k, v) for k, v in table.items()]

    def print_top_n_functions(self, by: Metrics, n: int = 10) -> None:
        """Print the ``n`` functions that come first by ``by``."""
        if not isinstance(by, Metrics):
            raise ConfigError("by", by, f"a Metrics member: one of {list(Metrics)}")
        if not isinstance(n, int):
            raise ConfigError("n", n, "an integer")
        self.ps.sort_stats(by.value).print_stats(n)

    def get_function_stats(self) -> Any:
        """One row per function: the text of each ``cProfileFunctionStats``, as smdebug's."""
        import pandas as pd  # the profiler extra: only the tables need it

        return pd.DataFrame([repr(function) for function in self.function_stats_list])


class PyinstrumentStepStats:
    """One pyinstrument profile: its HTML page and its JSON, loaded."""

    def __init__(self, html_file_path: str, json_stats: Any) -> None:
        self.html_file_path = html_file_path
        self.json_stats = json_stats


def _profiles_under(path: str) -> list[PythonProfile]:
    """The profiles under ``path``: a profiler output, or a folder inside its ``framework``."""
    parts = path.rstrip("/").split("/")
    if FRAMEWORK_METRICS_DIR in parts:
        root = "/".join(parts[: len(parts) - parts[::-1].index(FRAMEWORK_METRICS_DIR) - 1])
    else:
        root = path
    inside = path.rstrip("/") + "/"
    return [
        profile
        for profile in list_python_profiles(root or ".")
        if (profile.directory + "/").startswith(inside)
    ]


def _copy_profiles(url: str, into: str) -> list[PythonProfile]:
    """Copy the profiles under ``url`` to ``into/<node>/<segment>/``; the copies' profiles."""
    shutil.rmtree(into, ignore_errors=True)
    copies = []
    for profile in list_python_profiles(url):
        directory = os.path.join(into, profile.node_id, posixpath.basename(profile.directory))
        os.makedirs(directory, exist_ok=True)
        for name in files.list_files(profile.directory):
            if "/" not in name:
                content = files.read_bytes(posixpath.join(profile.directory, name))
                with open(os.path.join(directory, name), "wb") as copy:
                    copy.write(content)
        copies.append(
            PythonProfile(
                profile.framework,
                profile.profiler,
                profile.node_id,
                profile.start,
                profile.end,
                directory,
                profile.timer,
            )
        )
    return copies


class PythonProfileAnalysis:
    """The Python profiles of one profiler (``name``); see the module docstring."""

    name = ""

    def __init__(self, local_profile_dir: str = "python_stats", s3_path: str | None = None) -> None:
        self.local_profile_dir = os.fspath(local_profile_dir)
        self.s3_path = s3_path
        self.python_profile_stats: list[StepPythonProfileStats] = []
        self._refresh_python_profile_stats(True)

    def _load(self) -> list[PythonProfile]:
        if self.s3_path:
            if not os.path.isdir(self.local_profile_dir):
                raise ConfigError(
                    "local_profile_dir",
                    self.local_profile_dir,
                    "an existing folder: the profiles of s3_path are copied into it",
                )
            into = os.path.join(self.local_profile_dir, "python_stats")
            return _copy_profiles(self.s3_path, into)
        if not files.exists(self.local_profile_dir):
            raise ConfigError(
                "local_profile_dir",
                self.local_profile_dir,
                "an existing folder: a job's profiler output or a folder of profiles in it",
            )
        return _profiles_under(self.local_profile_dir)

    def _stats_of(self, profile: PythonProfile) -> list[StepPythonProfileStats]:
        return [StepPythonProfileStats(profile, profile.stats_file)]

    def _refresh_python_profile_stats(self, refresh_stats: bool) -> None:
        if refresh_stats:
            self.python_profile_stats = [
                stats
                for profile in self._load()
                if profile.profiler == self.name
                for stats in self._stats_of(profile)
            ]

    def _of_node(self, node_id: str) -> list[StepPythonProfileStats]:
        if not self.python_profile_stats:
            return []
        if node_id == "any":
            node_id = self.python_profile_stats[0].node_id
        return [stats for stats in self.python_profile_stats if stats.node_id == node_id]

    def _aggregate_stats(self, requested: list[StepPythonProfileStats]) -> Any:
        return requested

    def _fetch(
        self,
        keep: Callable[[StepPythonProfileStats], bool],
        node_id: str,
        refresh_stats: bool,
    ) -> Any:
        self._refresh_python_profile_stats(refresh_stats)
        return self._aggregate_stats([stats for stats in self._of_node(node_id) if keep(stats)])

    def fetch_profile_stats_by_step(
        self,
        start_step: int,
        end_step: int | None = None,
        mode: PythonProfileModes = PythonProfileModes.TRAIN,
        start_phase: StepPhase = StepPhase.STEP_START,
        end_phase: StepPhase = StepPhase.STEP_END,
        node_id: str = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """The profiles of steps ``start_step`` to ``end_step`` (default: ``start_step``) that
        start and end in ``mode``, from ``start_phase`` to ``end_phase``."""
        last = start_step if end_step is None else end_step
        return self._fetch(
            lambda stats: (
                stats.in_step_interval(start_step, last, start_phase, end_phase)
                and stats.has_start_and_end_mode(mode, mode)
            ),
            node_id,
            refresh_stats,
        )

    def fetch_profile_stats_by_time(
        self,
        start_time_since_epoch_in_secs: float,
        end_time_since_epoch_in_secs: float,
        node_id: str = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """The profiles that start or end within the time range (seconds since the epoch)."""
        start_us = start_time_since_epoch_in_secs * 1e6
        end_us = end_time_since_epoch_in_secs * 1e6
        return self._fetch(
            lambda stats: stats.in_time_interval(start_us, end_us), node_id, refresh_stats
        )

    def fetch_profile_stats_between_modes(
        self,
        start_mode: PythonProfileModes,
        end_mode: PythonProfileModes,
        node_id: str = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """The profiles that start in ``start_mode`` and end in ``end_mode``."""
        return self._fetch(
            lambda stats: stats.has_start_and_end_mode(start_mode, end_mode),
            node_id,
            refresh_stats,
        )

    def fetch_pre_step_zero_profile_stats(
        self, node_id: str = "any", refresh_stats: bool = True
    ) -> Any:
        """The profile from the start of the script to step 0."""
        return self._fetch(
            StepPythonProfileStats.has_pre_step_zero_profile_stats, node_id, refresh_stats
        )

    def fetch_post_hook_close_profile_stats(
        self, node_id: str = "any", refresh_stats: bool = True
    ) -> Any:
        """The profile from the hook's close to the end of the script."""
        return self._fetch(
            StepPythonProfileStats.has_post_hook_close_profile_stats, node_id, refresh_stats
        )

    def list_profile_stats(self, refresh_stats: bool = True) -> Any:
        """One row per profile: profiler_name, framework, node_id, start_mode, start_step,
        start_phase, start_time_since_epoch_in_micros, the same for the end, stats_path."""
        import pandas as pd  # the profiler extra: only the tables need it

        self._refresh_python_profile_stats(refresh_stats)
        if not self.python_profile_stats:
            print("No stats were found!")
            return pd.DataFrame()
        frame = pd.DataFrame([dict(vars(stats)) for stats in self.python_profile_stats])
        frame["start_mode"] = frame["start_mode"].map(_MODE_NAMES)
        frame["end_mode"] = frame["end_mode"].map(_MODE_NAMES)
        return frame

    def list_available_node_ids(self, refresh_stats: bool = True) -> list[str]:
        """The training processes that have profiles, sorted."""
        self._refresh_python_profile_stats(refresh_stats)
        return sorted({stats.node_id for stats in self.python_profile_stats})


class cProfileAnalysis(PythonProfileAnalysis):
    """The cProfile profiles; each fetch adds its profiles up into one ``cProfileStats``
    (None, with a line printed, when none matched)."""

    name = CPROFILE

    def _aggregate_stats(self, requested: list[StepPythonProfileStats]) -> cProfileStats | None:
        if not requested:
            print("No stats were found for the requested interval!")
            return None
        added = pstats.Stats()
        for stats in requested:
            added.add(stats.stats_path)
        return cProfileStats(added)

    def fetch_profile_stats_by_training_phase(
        self, node_id: str = "any", refresh_stats: bool = True
    ) -> dict[tuple[PythonProfileModes, PythonProfileModes], cProfileStats]:
        """The profiles added up per (start mode, end mode) pair that has any."""
        self._refresh_python_profile_stats(refresh_stats)
        found = {}
        for start_mode in PythonProfileModes:
            for end_mode in PythonProfileModes:
                stats = self.fetch_profile_stats_between_modes(
                    start_mode, end_mode, node_id=node_id, refresh_stats=False
                )
                if stats is not None:
                    found[(start_mode, end_mode)] = stats
        return found

    def fetch_profile_stats_by_job_phase(
        self, node_id: str = "any", refresh_stats: bool = True
    ) -> dict[str, cProfileStats]:
        """``initialization`` (until step 0), ``training_loop`` and ``finalization`` (after the
        hook's close), each added up; the first and last only when profiled."""
        by_modes = self.fetch_profile_stats_by_training_phase(node_id, refresh_stats)
        phases = {}
        loop = pstats.Stats()
        for (start_mode, end_mode), stats in by_modes.items():
            if start_mode == PythonProfileModes.PRE_STEP_ZERO:
                phases["initialization"] = stats
            elif end_mode == PythonProfileModes.POST_HOOK_CLOSE:
                phases["finalization"] = stats
            else:
                loop.add(stats.ps)
        phases["training_loop"] = cProfileStats(loop)
        return phases


class PyinstrumentAnalysis(PythonProfileAnalysis):
    """The pyinstrument profiles; each fetch gives one ``PyinstrumentStepStats`` per profile
    (None, with a line printed, when none matched)."""

    name = PYINSTRUMENT

    def _stats_of(self, profile: PythonProfile) -> list[StepPythonProfileStats]:
        # smdebug listed a pyinstrument profile twice: its HTML page and its JSON.
        return [
            StepPythonProfileStats(profile, path)
            for path in (profile.html_file, profile.stats_file)
            if path is not None and files.exists(path)
        ]

    def _aggregate_stats(
        self, requested: list[StepPythonProfileStats]
    ) -> list[PyinstrumentStepStats] | None:
        if not requested:
            print("No stats were found for the requested interval!")
            return None
        by_start: dict[float, list[StepPythonProfileStats]] = {}
        for stats in requested:
            by_start.setdefault(stats.start_time_since_epoch_in_micros, []).append(stats)
        found = []
        for pair in by_start.values():
            html = next((s.stats_path for s in pair if s.stats_path.endswith(".html")), "")
            data = next((s.stats_path for s in pair if s.stats_path.endswith(".json")), None)
            content = json.loads(files.read_bytes(data)) if data is not None else None
            found.append(PyinstrumentStepStats(html, content))
        return found
