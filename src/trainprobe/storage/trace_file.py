"""Framework profiling output on disk: the timeline files (Chrome trace events) and the layout.

Layout, under a profiler output directory (what SageMaker uploads as ``<job>/profiler-output/``),
as smdebug writes it (reference/smdebug.md §5.1)::

    framework/pevents/<YYYYMMDDHH>/<lastEventEndUs>_<node>_pythontimeline.json     a finished file
    framework/<node>_pythontimeline.json.<id>.tmp                                  the open file
    framework/pytorch/detailed_profiling/<YYYYMMDDHH>/<startstep:09>/<node>.<startUs>.pt.trace.json
    framework/pytorch/<cprofile|pyinstrument>/<node>/<start>_<end>/python_stats[.json|.html]
    framework/pytorch/cprofile/<node>/<start>_<end>/cprofile_timer                 trainprobe's own

``<lastEventEndUs>`` is when the file's latest event ended (microseconds since the epoch) and
``<YYYYMMDDHH>`` that moment's UTC hour; readers use the name to skip files that end before the
time they look for. ``<node>`` names the process (``<rank or pid>-<host>``) and never holds ``_``,
which separates the parts of a name. A Python profile's ``<start>`` and ``<end>`` are each
``<mode>-<step>-<phase>-<timeUs>`` (``global-9-stepstart-1795314532983397``; mode ``prestepzero`` or
``posthookclose`` and step ``*`` outside the steps). Beside a cProfile profile's ``python_stats``,
``cprofile_timer`` names the clock it was taken with (``total_time``, ``cpu_time`` or
``off_cpu_time``, one line of text); it is written first, so it is there once ``python_stats`` is.
smdebug wrote no such file (its readers skip it), so a profile without one has an unknown clock.

A timeline file is a JSON array with one event per line::

    [
    {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": T0}},
    {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
    {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}},
    {"name": "process_sort_index", "ph": "M", "pid": 1, "args": {"sort_index": 1}},
    {"name": "Step:ModeKeys.TRAIN", "pid": 1, "tid": 0, "ph": "X", "ts": 17.5, "dur": 868.0, ...}
    ]

Each training phase is a "process" (a fake pid, from 1) named by a metadata event written once per
file, before the phase's first event; pid 0 holds only the start time that every ``ts`` is relative
to (in microseconds, like ``dur``). Unlike smdebug, pid 0 is never a phase, so its metadata is not
repeated. Perfetto and chrome://tracing open the files as they are.

A file is written under a temporary name (which readers, smdebug's included, skip) and renamed to
its final name when it is closed: when it reaches ``max_file_size`` bytes, when ``close_interval``
seconds have passed since it was opened, or when the writer closes. So a reader sees whole files
only. After ``open_fail_threshold`` failed attempts in a row to open a file, the writer gives up.
"""

from __future__ import annotations

import json
import logging
import math
import os
import posixpath
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO, NamedTuple

from trainprobe.config.errors import ConfigError
from trainprobe.config.framework_profile import (
    CLOSE_FILE_INTERVAL_DEFAULT,
    FILE_OPEN_FAIL_THRESHOLD_DEFAULT,
    MAX_FILE_SIZE_DEFAULT,
)
from trainprobe.storage import files
from trainprobe.storage.job_layout import FRAMEWORK_METRICS_DIR
from trainprobe.storage.locations import join

__all__ = [
    "CPROFILE_STATS",
    "CPROFILE_TIMER",
    "PEVENTS_DIR",
    "PYINSTRUMENT_HTML",
    "PYINSTRUMENT_JSON",
    "TIMELINE_SUFFIX",
    "ProfilePoint",
    "TimelineEvent",
    "TimelineFile",
    "TraceEvent",
    "TraceFileReader",
    "TraceFileWriter",
    "check_trace_node_id",
    "detailed_profiling_file",
    "parse_python_stats_dir",
    "parse_timeline_file_name",
    "python_stats_dir",
    "timeline_file",
]

log = logging.getLogger(__name__)

PEVENTS_DIR = f"{FRAMEWORK_METRICS_DIR}/pevents"
TIMELINE_SUFFIX = "pythontimeline.json"
START_TIME_KEY = "start_time_since_epoch_in_micros"
CPROFILE_STATS = "python_stats"
CPROFILE_TIMER = "cprofile_timer"
PYINSTRUMENT_JSON = "python_stats.json"
PYINSTRUMENT_HTML = "python_stats.html"

_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]*$")


class TimelineEvent(NamedTuple):
    """One complete event to write, as it travels from the profiler to the trace file.

    Times are in microseconds since the epoch; ``tid`` and ``thread_name`` name the thread row
    the event is drawn on (the name is declared once per phase and thread).
    """

    phase: str
    name: str
    start_us: float
    duration_us: float
    args: Mapping[str, Any] | None = None
    tid: int = 0
    thread_name: str | None = None


_TIMELINE_NAME = re.compile(r"^(\d+)_([^_]+)_(.+\.json)$")
_POINT = re.compile(r"^([a-z]+)-(\*|\d+)-([a-z]+)-(\d+(?:\.\d+)?)$")


def check_trace_node_id(node_id: object, field: str = "node_id") -> str:
    """``node_id`` if it can name a process in trace file names (letters, digits, ``.``, ``-``)."""
    if isinstance(node_id, str) and _NODE_ID.match(node_id):
        return node_id
    suggestion = None
    if isinstance(node_id, str):
        cleaned = re.sub(r"[^A-Za-z0-9.\-]+", "-", node_id).strip("-.")
        suggestion = cleaned or None
    raise ConfigError(
        field,
        node_id,
        "letters, digits, '.' and '-' only, such as '0-algo-1' ('_' separates file-name parts)",
        suggestion=suggestion,
    )


def _hour(time_us: float) -> str:
    return time.strftime("%Y%m%d%H", time.gmtime(time_us / 1e6))


def timeline_file(last_end_us: int, node_id: str, suffix: str = TIMELINE_SUFFIX) -> str:
    """A finished timeline file's path, relative to the profiler output directory."""
    return f"{PEVENTS_DIR}/{_hour(last_end_us)}/{last_end_us}_{node_id}_{suffix}"


class TimelineFile(NamedTuple):
    """A finished timeline file: its path (relative), its latest event end and its node."""

    path: str
    last_end_us: int
    node_id: str
    suffix: str


def parse_timeline_file_name(path: str) -> TimelineFile | None:
    """The parts of a timeline file's name, or None when it is not one."""
    match = _TIMELINE_NAME.match(posixpath.basename(path))
    if match is None:
        return None
    return TimelineFile(path, int(match.group(1)), match.group(2), match.group(3))


def detailed_profiling_file(framework: str, start_step: int, start_us: float, node_id: str) -> str:
    """Where a detailed (torch.profiler) trace of steps from ``start_step`` goes, relative."""
    return (
        f"{FRAMEWORK_METRICS_DIR}/{framework}/detailed_profiling/{_hour(start_us)}/"
        f"{start_step:09d}/{node_id}.{int(start_us)}.pt.trace.json"
    )


class ProfilePoint(NamedTuple):
    """Where a Python profile starts or ends: mode, step (None outside steps), phase and time.

    ``mode`` is ``train``, ``eval``, ``predict``, ``global``, ``prestepzero`` or
    ``posthookclose``; ``phase`` is ``start``, ``stepstart``, ``forwardpassend``, ``stepend`` or
    ``end``; ``time_us`` is in microseconds since the epoch.
    """

    mode: str
    step: int | None
    phase: str
    time_us: float

    def __str__(self) -> str:
        step = "*" if self.step is None else str(self.step)
        return f"{self.mode}-{step}-{self.phase}-{int(self.time_us)}"


def python_stats_dir(
    framework: str, profiler: str, node_id: str, start: ProfilePoint, end: ProfilePoint
) -> str:
    """The directory of one Python profile (``python_stats`` files inside), relative."""
    return f"{FRAMEWORK_METRICS_DIR}/{framework}/{profiler}/{node_id}/{start}_{end}"


def parse_python_stats_dir(name: str) -> tuple[ProfilePoint, ProfilePoint] | None:
    """The start and end of a Python profile from its directory name, or None."""
    parts = posixpath.basename(name.rstrip("/")).split("_")
    if len(parts) != 2:
        return None
    points = []
    for part in parts:
        match = _POINT.match(part)
        if match is None:
            return None
        mode, step, phase, at = match.groups()
        points.append(ProfilePoint(mode, None if step == "*" else int(step), phase, float(at)))
    return points[0], points[1]


class TraceFileWriter:
    """Writes trace events into rotated timeline files (see the module docstring for how).

    ``start_time_us`` (default: now) is the origin of every ``ts``. Phases are numbered (and
    shown) in the order of ``phase_order``, then in the order they first appear. ``clock``
    measures how long a file has been open (monotonic seconds; tests pass a fake one). Not
    thread-safe: one thread owns it. An OSError while writing an open file is raised; failing to
    open one is counted.
    """

    def __init__(
        self,
        out_dir: str,
        node_id: str,
        *,
        start_time_us: float | None = None,
        max_file_size: int = MAX_FILE_SIZE_DEFAULT,
        close_interval: float = CLOSE_FILE_INTERVAL_DEFAULT,
        open_fail_threshold: int = FILE_OPEN_FAIL_THRESHOLD_DEFAULT,
        suffix: str = TIMELINE_SUFFIX,
        phase_order: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out_dir = out_dir
        self.node_id = check_trace_node_id(node_id)
        self.start_time_us = time.time() * 1e6 if start_time_us is None else float(start_time_us)
        self.max_file_size = max_file_size
        self.close_interval = close_interval
        self.open_fail_threshold = open_fail_threshold
        self.suffix = suffix
        self.healthy = True
        self.files_written: list[str] = []
        self._clock = clock
        self._pids = {phase: pid for pid, phase in enumerate(phase_order, start=1)}
        self._file: BinaryIO | None = None
        self._temp = ""
        self._opened_at = 0.0
        self._size = 0
        self._first = True
        self._last_end_us = -math.inf
        self._declared: set[int] = set()
        self._threads: set[tuple[int, int]] = set()
        self._open_failures = 0

    def configure(self, *, max_file_size: int, close_interval: float) -> None:
        """Rotate by these limits from now on (a live configuration update)."""
        self.max_file_size = max_file_size
        self.close_interval = close_interval

    def add(
        self,
        phase: str,
        name: str,
        start_us: float,
        duration_us: float,
        args: Mapping[str, Any] | None = None,
        *,
        tid: int = 0,
        thread_name: str | None = None,
    ) -> None:
        """Write one complete event of ``phase`` (times in microseconds since the epoch)."""
        self.write(TimelineEvent(phase, name, start_us, duration_us, args, tid, thread_name))

    def write(self, event: TimelineEvent) -> None:
        """Write one complete event."""
        phase, name, start_us, duration_us, args, tid, thread_name = event
        if not self.healthy:
            return
        self.rotate_if_due()
        if self._file is None and not self._open():
            return
        pid = self._pids.get(phase)
        if pid is None:
            pid = self._pids[phase] = len(self._pids) + 1
        if pid not in self._declared:
            self._declared.add(pid)
            self._write({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": phase}})
            self._write(
                {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}
            )
        if thread_name is not None and (pid, tid) not in self._threads:
            self._threads.add((pid, tid))
            self._write(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "pid": pid,
                    "tid": tid,
                    "args": {"name": thread_name},
                }
            )
        record: dict[str, Any] = {
            "name": name,
            "pid": pid,
            "tid": tid,
            "ph": "X",
            "ts": round(start_us - self.start_time_us, 3),
            "dur": round(max(duration_us, 0.0), 3),
        }
        if args:
            record["args"] = dict(args)
        self._write(record)
        self._last_end_us = max(self._last_end_us, start_us + max(duration_us, 0.0))
        if self._size >= self.max_file_size:
            self._finish()

    def rotate_if_due(self) -> None:
        """Finish the open file if it has been open for ``close_interval`` seconds."""
        if self._file is not None and self._clock() - self._opened_at >= self.close_interval:
            self._finish()

    def close(self) -> None:
        """Finish the open file: it appears under its final name."""
        self._finish()

    def _open(self) -> bool:
        self._temp = files.scratch_path(
            join(
                self.out_dir,
                f"{FRAMEWORK_METRICS_DIR}/{self.node_id}_{self.suffix}.{uuid.uuid4().hex[:12]}{files.TEMP_SUFFIX}",
            )
        )
        try:
            os.makedirs(os.path.dirname(self._temp), exist_ok=True)
            self._file = open(self._temp, "wb")  # noqa: SIM115
        except OSError as error:
            self._open_failures += 1
            if self._open_failures >= self.open_fail_threshold:
                self.healthy = False
                log.error(
                    "trainprobe: cannot open a trace file under %s after %d tries (%s); "
                    "the timeline stops here",
                    self.out_dir,
                    self._open_failures,
                    error,
                )
            return False
        self._open_failures = 0
        self._opened_at = self._clock()
        self._size = 0
        self._first = True
        self._last_end_us = -math.inf
        self._declared = set()
        self._threads = set()
        self._size += self._file.write(b"[")
        self._write(
            {
                "name": "process_name",
                "ph": "M",
                "pid": 0,
                "args": {START_TIME_KEY: int(self.start_time_us)},
            }
        )
        self._write({"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}})
        return True

    def _write(self, event: Mapping[str, Any]) -> None:
        assert self._file is not None
        line = json.dumps(event, default=str).encode()
        self._size += self._file.write((b"\n" if self._first else b",\n") + line)
        self._first = False

    def _finish(self) -> None:
        file, self._file = self._file, None
        if file is None:
            return
        try:
            file.write(b"\n]\n")
        finally:
            file.close()
        last_end = math.ceil(self._last_end_us)
        final = join(self.out_dir, timeline_file(last_end, self.node_id, self.suffix))
        while files.exists(final):  # two files ending in the same microsecond
            last_end += 1
            final = join(self.out_dir, timeline_file(last_end, self.node_id, self.suffix))
        files.rename(self._temp, final)
        self.files_written.append(final)


class TraceEvent(NamedTuple):
    """One complete event read back, with absolute times in microseconds since the epoch."""

    phase: str
    name: str
    start_us: float
    duration_us: float
    args: dict[str, Any]
    node_id: str
    pid: int
    tid: int

    @property
    def end_us(self) -> float:
        """When the event ended."""
        return self.start_us + self.duration_us


_GLOBAL_STEP = re.compile(rb'"global_step": ?(\d+)')
_TAIL_BYTES = 16_384


def latest_timeline_step(out_dir: str) -> int | None:
    """The highest global step at the end of the step timeline: in the files being written and
    the newest finished one. It tells how far a live training has got, a few steps behind (the
    events its writer has not flushed yet); None without a timeline."""
    framework = join(out_dir, FRAMEWORK_METRICS_DIR)
    paths = [
        join(framework, name)
        for name in files.being_written(framework)
        if f"_{TIMELINE_SUFFIX}." in name
    ]
    finished = TraceFileReader(out_dir).files()
    if finished:
        paths.append(join(out_dir, finished[-1].path))
    steps = []
    for path in paths:
        try:
            size = files.size(path)
            length = min(size, _TAIL_BYTES)
            [tail] = files.read_ranges(path, [(size - length, length)])
        except (OSError, EOFError):
            continue  # renamed or replaced meanwhile
        found = _GLOBAL_STEP.findall(bytes(tail))
        if found:
            steps.append(max(int(step) for step in found))
    return max(steps, default=None)


class TraceFileReader:
    """The events of the finished timeline files under a profiler output directory, by time.

    Reads any writer's files of this layout (trainprobe's or smdebug's). Finished files never
    change, so each is parsed once and kept. A file that is not a trace is skipped with one
    warning.
    """

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self._parsed: dict[str, list[TraceEvent]] = {}

    def files(self) -> list[TimelineFile]:
        """Every finished timeline file, oldest last event first."""
        found = []
        for relative in files.list_files(join(self.out_dir, PEVENTS_DIR), ".json"):
            parsed = parse_timeline_file_name(relative)
            if parsed is not None:
                found.append(parsed._replace(path=f"{PEVENTS_DIR}/{relative}"))
        found.sort(key=lambda entry: (entry.last_end_us, entry.path))
        return found

    def events(
        self,
        start_us: float = -math.inf,
        end_us: float = math.inf,
        *,
        node_id: str | None = None,
        phase: str | None = None,
    ) -> list[TraceEvent]:
        """Events that overlap ``[start_us, end_us)``, by start time; of one node or phase."""
        found: list[TraceEvent] = []
        for entry in self.files():
            if entry.last_end_us < start_us or (node_id is not None and entry.node_id != node_id):
                continue
            found.extend(
                event
                for event in self._read(entry)
                if event.start_us < end_us
                and event.end_us >= start_us
                and (phase is None or event.phase == phase)
            )
        found.sort(key=lambda event: (event.start_us, -event.duration_us))
        return found

    def _read(self, entry: TimelineFile) -> list[TraceEvent]:
        events = self._parsed.get(entry.path)
        if events is None:
            events = self._parsed[entry.path] = self._parse(entry)
        return events

    def _parse(self, entry: TimelineFile) -> list[TraceEvent]:
        path = join(self.out_dir, entry.path)
        try:
            rows = json.loads(files.read_bytes(path))
            if not isinstance(rows, list):
                raise ValueError("not a JSON array")
        except (OSError, ValueError) as error:
            log.warning("skipping %s, which is not a trace file: %s", path, error)
            return []
        origin = 0.0
        phases: dict[int, str] = {}
        events = []
        for row in rows:
            if not isinstance(row, dict):
                continue
            found = row.get("args")
            args: dict[str, Any] = found if isinstance(found, dict) else {}
            if row.get("ph") == "M":
                if START_TIME_KEY in args:
                    origin = float(args[START_TIME_KEY])
                if row.get("name") == "process_name" and "name" in args:
                    phases[int(row.get("pid", 0))] = str(args["name"])
            elif row.get("ph") == "X":
                try:
                    pid = int(row.get("pid", 0))
                    events.append(
                        TraceEvent(
                            phases.get(pid, "Unknown"),
                            str(row.get("name", "")),
                            origin + float(row["ts"]),
                            float(row.get("dur", 0.0)),
                            dict(args),
                            entry.node_id,
                            pid,
                            int(row.get("tid", 0)),
                        )
                    )
                except (KeyError, TypeError, ValueError):
                    continue
        return events
