"""The Python profiles of a job: where they are, what segment of the training each covers, and
the time each function took in them.

Each profile is a directory ``framework/<framework>/<cprofile|pyinstrument>/<node>/<start>_<end>/``
(``trainprobe.storage.trace_file``) holding ``python_stats`` (cProfile's statistics, as
``pstats`` saves them) or ``python_stats.json`` and ``python_stats.html`` (Pyinstrument). The
directory name says where the profile started and ended: mode, step, phase and time.

Per function, a profile gives the time spent in the function itself (``own_s``; cProfile's
``tottime``) and in it and everything it called (``cumulative_s``; ``cumtime``), in seconds of
the profile's clock, and for cProfile the number of calls. Pyinstrument samples the stack rather
than counting calls: its times are summed over the call tree, a function that calls itself
counted once per stack, and its calls are unknown.

Which clock cProfile used (``total_time``, ``cpu_time`` or ``off_cpu_time``) is in the file
``cprofile_timer`` beside ``python_stats``. smdebug wrote no such file: for its profiles (or a
timer file that cannot be read) the ProfilingPlan the job ran with says, when given.
"""

from __future__ import annotations

import json
import marshal
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from trainprobe.config.metrics_config import cProfileTimer
from trainprobe.config.profiler_config import ProfilingPlan
from trainprobe.errors import FormatError
from trainprobe.storage import files
from trainprobe.storage.job_layout import FRAMEWORK_METRICS_DIR
from trainprobe.storage.locations import join
from trainprobe.storage.trace_file import (
    CPROFILE_STATS,
    CPROFILE_TIMER,
    PYINSTRUMENT_HTML,
    PYINSTRUMENT_JSON,
    ProfilePoint,
    parse_python_stats_dir,
)

__all__ = [
    "CPROFILE",
    "CPROFILE_STATS",
    "CPROFILE_TIMER",
    "PYINSTRUMENT",
    "PYINSTRUMENT_HTML",
    "PYINSTRUMENT_JSON",
    "FunctionStats",
    "ProfileUnreadable",
    "PythonProfile",
    "add_up",
    "list_python_profiles",
    "read_functions",
]

CPROFILE = "cprofile"
PYINSTRUMENT = "pyinstrument"
_STATS_FILES = {CPROFILE: CPROFILE_STATS, PYINSTRUMENT: PYINSTRUMENT_JSON}


class ProfileUnreadable(FormatError):
    """A profile's statistics file is not what its profiler writes."""


@dataclass(frozen=True)
class PythonProfile:
    """One Python profile: who took it, over which segment, and where its files are."""

    framework: str
    profiler: str
    node_id: str
    start: ProfilePoint
    end: ProfilePoint
    directory: str
    timer: str | None

    @property
    def stats_file(self) -> str:
        """The statistics file: ``python_stats`` or ``python_stats.json``."""
        return join(self.directory, _STATS_FILES[self.profiler])

    @property
    def html_file(self) -> str | None:
        """Pyinstrument's HTML page of the profile (None for cProfile)."""
        return join(self.directory, PYINSTRUMENT_HTML) if self.profiler == PYINSTRUMENT else None

    @property
    def duration_us(self) -> float:
        """The wall time the profile covers."""
        return self.end.time_us - self.start.time_us


@dataclass(frozen=True)
class FunctionStats:
    """The time of one function in one or more profiles (seconds of the profiles' clock)."""

    function: str
    filename: str
    line: int
    calls: int | None
    primitive_calls: int | None
    own_s: float
    cumulative_s: float


def list_python_profiles(out_dir: str, plan: ProfilingPlan | None = None) -> list[PythonProfile]:
    """Every Python profile under a profiler output directory, by start time then node.

    A cProfile profile's ``timer`` is the one its ``cprofile_timer`` file names, else the one
    ``plan`` gives for its start step, else None (unknown).
    """
    found = []
    framework_dir = join(out_dir, FRAMEWORK_METRICS_DIR)
    listed = files.list_files(framework_dir)
    timer_files = {relative for relative in listed if relative.endswith("/" + CPROFILE_TIMER)}
    for relative in listed:
        parts = relative.split("/")
        if len(parts) != 5 or _STATS_FILES.get(parts[1]) != parts[4]:
            continue
        framework, profiler, node_id, name, _ = parts
        points = parse_python_stats_dir(name)
        if points is None:
            continue
        start, end = points
        directory = join(framework_dir, posixpath.dirname(relative))
        timer = None
        if profiler == CPROFILE:
            written = posixpath.join(posixpath.dirname(relative), CPROFILE_TIMER) in timer_files
            timer = _written_timer(directory) if written else None
            if timer is None and plan is not None:
                clock = plan.python_timer_at(start.step if start.step is not None else -1)
                timer = clock.value if clock is not None else None
        found.append(PythonProfile(framework, profiler, node_id, start, end, directory, timer))
    found.sort(key=lambda profile: (profile.start.time_us, profile.node_id))
    return found


def _written_timer(directory: str) -> str | None:
    """The clock a profile's ``cprofile_timer`` file names; None when it names no known one."""
    try:
        name = files.read_bytes(join(directory, CPROFILE_TIMER)).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    known = {timer.value for timer in cProfileTimer if timer is not cProfileTimer.DEFAULT}
    return name if name in known else None


def read_functions(profile: PythonProfile) -> list[FunctionStats]:
    """The functions of one profile; ProfileUnreadable when its file is not a profile."""
    content = files.read_bytes(profile.stats_file)
    if profile.profiler == CPROFILE:
        return _cprofile_functions(content, profile.stats_file)
    return _pyinstrument_functions(content, profile.stats_file)


def _cprofile_functions(content: bytes, path: str) -> list[FunctionStats]:
    try:
        table = marshal.loads(content)
        if not isinstance(table, dict):
            raise TypeError("not a table of functions")
        found = []
        for (filename, line, function), row in table.items():
            primitive, calls, own, cumulative = row[:4]
            found.append(
                FunctionStats(
                    str(function),
                    str(filename),
                    int(line),
                    int(calls),
                    int(primitive),
                    float(own),
                    float(cumulative),
                )
            )
    except (EOFError, ValueError, TypeError) as error:
        raise ProfileUnreadable(f"{path} is not a cProfile statistics file: {error}") from error
    return found


def _real_children(frame: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A frame's callees, leaving out Pyinstrument's own bookkeeping frames (``[self]``)."""
    for child in frame.get("children") or []:
        if isinstance(child, dict) and not str(child.get("function", "")).startswith("["):
            yield child


def _pyinstrument_functions(content: bytes, path: str) -> list[FunctionStats]:
    try:
        root = json.loads(content)["root_frame"]
        if not isinstance(root, dict):
            raise TypeError("root_frame is not a frame")
        own: dict[tuple[str, str, int], float] = {}
        cumulative: dict[tuple[str, str, int], float] = {}
        # (frame, the functions on the stack above it): iterative, stacks can be deep.
        pending: list[tuple[dict[str, Any], frozenset[tuple[str, str, int]]]] = [
            (root, frozenset())
        ]
        while pending:
            frame, above = pending.pop()
            key = (
                str(frame.get("function", "")),
                str(frame.get("file_path") or frame.get("file_path_short") or ""),
                int(frame.get("line_no") or 0),
            )
            total = float(frame.get("time", 0.0))
            children = list(_real_children(frame))
            own[key] = own.get(key, 0.0) + total - sum(float(c.get("time", 0.0)) for c in children)
            if key not in above:
                cumulative[key] = cumulative.get(key, 0.0) + total
            pending.extend((child, above | {key}) for child in children)
    except (KeyError, TypeError, ValueError) as error:
        raise ProfileUnreadable(f"{path} is not a Pyinstrument JSON profile: {error}") from error
    return [
        FunctionStats(function, filename, line, None, None, max(own[key], 0.0), cumulative[key])
        for key in cumulative
        for function, filename, line in [key]
    ]


def add_up(tables: Iterable[list[FunctionStats]]) -> list[FunctionStats]:
    """Several profiles' functions as one table: times and calls summed per function."""
    totals: dict[tuple[str, str, int], FunctionStats] = {}
    for table in tables:
        for row in table:
            key = (row.function, row.filename, row.line)
            seen = totals.get(key)
            if seen is None:
                totals[key] = row
                continue
            totals[key] = FunctionStats(
                row.function,
                row.filename,
                row.line,
                _sum(seen.calls, row.calls),
                _sum(seen.primitive_calls, row.primitive_calls),
                seen.own_s + row.own_s,
                seen.cumulative_s + row.cumulative_s,
            )
    return list(totals.values())


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b
