"""System metrics on disk: smdebug's JSON-lines files, one per host per minute, written and read.

Layout, under a profiler output directory (what SageMaker uploads as ``<job>/profiler-output/``)::

    system/incremental/<YYYYMMDDHH>/<minute>.<node>.json       a finished minute
    system/incremental/<YYYYMMDDHH>/<minute>.<node>.partial    the minute being written

``<minute>`` is the Unix time in seconds (10 digits) at which the minute starts, ``<YYYYMMDDHH>``
its UTC hour and ``<node>`` the host, ``algo-<n>``. Each line is one reading, with SageMaker's keys
in SageMaker's order::

    {"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":4.76,"NodeId":"algo-1","Timestamp":1591160699.457}

``Timestamp`` is in seconds since the epoch; every reading of one sample carries the same one, so
readers that group readings by time (smdebug's profiler rules do) see one sample as one data point.

How files appear
----------------
Nothing is appended in place. The writer keeps the current minute in memory and publishes all of
it to the minute's ``.partial`` file with an atomic write (temporary name, then rename) at most
every ``publish_seconds`` (2 s by default). When the minute ends (a reading of a later minute
arrives) or the writer closes, the latest content is published and the ``.partial`` file is
renamed to the ``.json`` name. So for each host and minute a reader finds nothing, a partial file
or a finished one, always made of whole lines, and every later version of a minute begins with the
bytes of the earlier one. The reader relies on that: it remembers how far it has parsed each minute
and reads only what was added. (A monitor restarted within a minute it already wrote continues
that minute: it picks up the existing content, and the ``.json`` file is replaced by a longer one
when the minute ends.)

smdebug's readers see only the finished ``.json`` files: they list names containing ``.json``,
which neither ``.partial`` files nor their temporary names (``*.partial.<id>.tmp``) contain. A live
smdebug rule therefore lags by up to a minute, as it did on SageMaker; trainprobe's reader reads the
partial minute too, so a rule following a live job sees a reading within ``publish_seconds`` plus
one sampling interval.

What the monitor writes (Type / Name / Dimension -> Value)
----------------------------------------------------------
The first five rows are SageMaker's own, read by smdebug's rules and its pandas analysis; the others
are trainprobe's, under Types that smdebug's analysis does not mistake for utilisation percentages
(it groups readings by a substring of Type: cpu, gpu, memory, i/o, network)::

    cpu / cpu0..cpuN-1, cpu_total / CPUUtilization      % of the core busy; cpu_total is the mean
    cpu / cpu0..cpuN-1, cpu_total / I/OWaitPercentage   % of the core waiting for I/O; same total
    memory / MemoryUsedPercent / ""                     % of host memory in use
    i/o / ReadThroughputInBytesPerSecond, WriteThroughputInBytesPerSecond, IOPS / ""    all disks
    network / ReceiveBytesPerSecond, TransmitBytesPerSecond / Algorithm    all but loopback
    gpu / gpu0.. / GPUUtilization, GPUMemoryUtilization  % busy; % of its memory in use
    host / MemoryUsedBytes / ""                           host memory in use (total - available)
    accelerator / gpu0.. / GPUMemoryUsedBytes, GPUMemoryBandwidthUtilization, GPUPowerWatts,
                           GPUTemperatureCelsius
    process / training / ProcessCPUPercent (of one core, like top), ProcessMemoryUsedBytes (RSS),
                         ProcessCount: the training process and its descendants

``cpu_total`` is the mean of the cores in both dimensions, so a reader that averages every name of
a dimension (as smdebug's OverallSystemUsage and BatchSize rules do) gets the same answer with it.
The cpu, gpu and accelerator rows come with every sample; the monitor reads the others at most
every half second (``trainprobe.capture.system_monitor.monitor``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import logging
import math
import posixpath
import re
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from trainprobe.config.errors import ConfigError, closest
from trainprobe.storage import files
from trainprobe.storage.job_layout import SYSTEM_METRICS_DIR
from trainprobe.storage.locations import join

__all__ = [
    "ACCELERATOR",
    "ALGORITHM",
    "CPU",
    "CPU_TOTAL",
    "CPU_UTILIZATION",
    "GPU",
    "GPU_MEMORY_BANDWIDTH_UTILIZATION",
    "GPU_MEMORY_USED_BYTES",
    "GPU_MEMORY_UTILIZATION",
    "GPU_POWER_WATTS",
    "GPU_TEMPERATURE_CELSIUS",
    "GPU_UTILIZATION",
    "HOST",
    "INCREMENTAL_DIR",
    "IO",
    "IOPS",
    "IO_WAIT_PERCENTAGE",
    "MEMORY",
    "MEMORY_USED_BYTES",
    "MEMORY_USED_PERCENT",
    "NETWORK",
    "PROCESS",
    "PROCESS_COUNT",
    "PROCESS_CPU_PERCENT",
    "PROCESS_MEMORY_USED_BYTES",
    "PUBLISH_SECONDS",
    "READ_BYTES_PER_SECOND",
    "RECEIVE_BYTES_PER_SECOND",
    "TRAINING_PROCESS",
    "TRANSMIT_BYTES_PER_SECOND",
    "WRITE_BYTES_PER_SECOND",
    "MetricKey",
    "MinuteFile",
    "Reading",
    "SystemMetric",
    "SystemMetricsReader",
    "SystemMetricsWriter",
    "TimeUnit",
    "check_node_id",
    "minute_file",
    "parse_minute_file_name",
]

log = logging.getLogger(__name__)

INCREMENTAL_DIR = f"{SYSTEM_METRICS_DIR}/incremental"
PUBLISH_SECONDS = 2.0
PARTIAL_SUFFIX = ".partial"
FINAL_SUFFIX = ".json"

# Types (the resource), then names and dimensions; see the table in the module docstring.
CPU, GPU, MEMORY, IO, NETWORK = "cpu", "gpu", "memory", "i/o", "network"
HOST, ACCELERATOR, PROCESS = "host", "accelerator", "process"
CPU_UTILIZATION = "CPUUtilization"
IO_WAIT_PERCENTAGE = "I/OWaitPercentage"
CPU_TOTAL = "cpu_total"
MEMORY_USED_PERCENT = "MemoryUsedPercent"
MEMORY_USED_BYTES = "MemoryUsedBytes"
READ_BYTES_PER_SECOND = "ReadThroughputInBytesPerSecond"
WRITE_BYTES_PER_SECOND = "WriteThroughputInBytesPerSecond"
IOPS = "IOPS"
ALGORITHM = "Algorithm"
RECEIVE_BYTES_PER_SECOND = "ReceiveBytesPerSecond"
TRANSMIT_BYTES_PER_SECOND = "TransmitBytesPerSecond"
GPU_UTILIZATION = "GPUUtilization"
GPU_MEMORY_UTILIZATION = "GPUMemoryUtilization"
GPU_MEMORY_USED_BYTES = "GPUMemoryUsedBytes"
GPU_MEMORY_BANDWIDTH_UTILIZATION = "GPUMemoryBandwidthUtilization"
GPU_POWER_WATTS = "GPUPowerWatts"
GPU_TEMPERATURE_CELSIUS = "GPUTemperatureCelsius"
TRAINING_PROCESS = "training"
PROCESS_CPU_PERCENT = "ProcessCPUPercent"
PROCESS_MEMORY_USED_BYTES = "ProcessMemoryUsedBytes"
PROCESS_COUNT = "ProcessCount"

_NODE_ID = re.compile(r"^algo-[1-9]\d*$")
_FILE_NAME = re.compile(r"^(\d{10})\.(algo-\d+)\.(json|partial)$")
# Files of other writers may hold readings a little outside their minute (smdebug allows minutes).
_SLACK_SECONDS = 60.0


class MetricKey(NamedTuple):
    """What a reading measures: Type, Name and Dimension of its line."""

    type: str
    name: str
    dimension: str


Reading = tuple[MetricKey, float]
"""One value of one sample, as the writer takes it."""


class SystemMetric(NamedTuple):
    """One reading, with the attribute names of smdebug's ``ProfilerSystemEvent``."""

    type: str
    name: str
    dimension: str
    value: float
    node_id: str
    timestamp: float


class TimeUnit(str, enum.Enum):
    """The unit of the times given to ``SystemMetricsReader.events``."""

    SECONDS = "seconds"
    MICROSECONDS = "microseconds"


@dataclass(frozen=True)
class MinuteFile:
    """One host's minute on disk: its ``.json`` and/or ``.partial`` file (relative to out_dir)."""

    node_id: str
    minute: int
    final: str | None
    partial: str | None

    @property
    def complete(self) -> bool:
        """Whether the minute is finished: only its ``.json`` file exists."""
        return self.partial is None


def check_node_id(node_id: object, field: str = "node_id") -> str:
    """``node_id`` when it names a host as smdebug's readers expect (``algo-<n>``)."""
    if isinstance(node_id, str) and _NODE_ID.match(node_id):
        return node_id
    suggestion = None
    if isinstance(node_id, str):
        digits = re.sub(r"\D", "", node_id)
        suggestion = f"algo-{int(digits)}" if digits and int(digits) > 0 else None
    raise ConfigError(
        field,
        node_id,
        "algo-<n> with n a whole number from 1 (smdebug reads only such names)",
        suggestion=suggestion,
    )


def minute_file(minute: int, node_id: str, *, partial: bool = False) -> str:
    """The file of one host's minute, relative to the profiler output directory."""
    hour = time.strftime("%Y%m%d%H", time.gmtime(minute))
    suffix = PARTIAL_SUFFIX if partial else FINAL_SUFFIX
    return f"{INCREMENTAL_DIR}/{hour}/{minute:010d}.{node_id}{suffix}"


def parse_minute_file_name(path: str) -> tuple[int, str, bool] | None:
    """(minute, node, is partial) of a system-metrics file, or None when it is not one."""
    match = _FILE_NAME.match(posixpath.basename(path))
    if match is None:
        return None
    return int(match.group(1)), match.group(2), match.group(3) == "partial"


def _number(value: float) -> bytes:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()
    return repr(round(float(value), 2)).encode()


class SystemMetricsWriter:
    """Writes one host's readings into per-minute files (see the module docstring for how).

    Not thread-safe: one monitor owns it. ``close()`` finishes the current minute; writing again
    afterwards continues it.
    """

    def __init__(
        self, out_dir: str, node_id: str, *, publish_seconds: float = PUBLISH_SECONDS
    ) -> None:
        self.out_dir = out_dir
        self.node_id = check_node_id(node_id)
        self.publish_seconds = publish_seconds
        self._node_and_time = b',"NodeId":' + json.dumps(node_id).encode() + b',"Timestamp":'
        self._prefixes: dict[MetricKey, bytes] = {}
        self._minute: int | None = None
        self._buffer = bytearray()
        self._unpublished = False
        self._partial_on_disk = False
        self._published_at = -math.inf
        self._recovered = False

    def write(self, timestamp: float, readings: Iterable[Reading]) -> None:
        """Add one sample's readings, all taken at ``timestamp`` (seconds since the epoch).

        Non-finite values are left out (JSON cannot hold them). A timestamp before the current
        minute (the clock was set back) stays in the current minute's file.
        """
        minute = int(timestamp // 60) * 60
        if self._minute is None or minute > self._minute:
            self._start(minute)
        buffer = self._buffer
        before = len(buffer)
        stamp = repr(float(timestamp)).encode() + b"}\n"
        for key, value in readings:
            if not math.isfinite(value):
                continue
            prefix = self._prefixes.get(key)
            if prefix is None:
                prefix = self._prefix(key)
            buffer += prefix
            buffer += _number(value)
            buffer += self._node_and_time
            buffer += stamp
        if len(buffer) > before:
            self._unpublished = True
        if time.monotonic() - self._published_at >= self.publish_seconds:
            self.flush()

    def flush(self) -> None:
        """Publish the current minute's readings now (to its ``.partial`` file)."""
        if not self._unpublished or self._minute is None:
            return
        files.write_atomic(self._path(self._minute, partial=True), self._buffer)
        self._unpublished = False
        self._partial_on_disk = True
        self._published_at = time.monotonic()

    def close(self) -> None:
        """Finish the current minute: its readings appear under the ``.json`` name."""
        if self._minute is not None:
            self._finish()
        self._minute = None

    def _prefix(self, key: MetricKey) -> bytes:
        prefix = (
            f'{{"Type":{json.dumps(key.type)},"Name":{json.dumps(key.name)},'
            f'"Dimension":{json.dumps(key.dimension)},"Value":'
        ).encode()
        self._prefixes[key] = prefix
        return prefix

    def _path(self, minute: int, *, partial: bool) -> str:
        return join(self.out_dir, minute_file(minute, self.node_id, partial=partial))

    def _start(self, minute: int) -> None:
        if self._minute is not None:
            self._finish()
        if not self._recovered:
            self._finish_earlier_partials(minute)
            self._recovered = True
        self._minute = minute
        self._buffer = bytearray(self._existing(minute))
        self._unpublished = False
        self._partial_on_disk = files.exists(self._path(minute, partial=True))

    def _finish(self) -> None:
        assert self._minute is not None
        self.flush()
        if self._partial_on_disk:
            files.rename(
                self._path(self._minute, partial=True), self._path(self._minute, partial=False)
            )
            self._partial_on_disk = False
        self._buffer = bytearray()

    def _existing(self, minute: int) -> bytes:
        """What an earlier writer left of this minute (whole lines only), to continue it."""
        for partial in (True, False):
            path = self._path(minute, partial=partial)
            try:
                content = files.read_bytes(path)
            except FileNotFoundError:
                continue
            return content[: content.rfind(b"\n") + 1]
        return b""

    def _finish_earlier_partials(self, minute: int) -> None:
        """Rename the partial files an earlier writer of this host left (it stopped abruptly)."""
        for relative in files.list_files(join(self.out_dir, INCREMENTAL_DIR), PARTIAL_SUFFIX):
            parsed = parse_minute_file_name(relative)
            if parsed is None or parsed[1] != self.node_id or parsed[0] >= minute:
                continue
            left = join(join(self.out_dir, INCREMENTAL_DIR), relative)
            files.rename(left, left[: -len(PARTIAL_SUFFIX)] + FINAL_SUFFIX)


@dataclass
class _Parsed:
    """How much of one host's minute has been parsed, and the readings found so far."""

    offset: int = 0
    events: list[SystemMetric] = dataclasses.field(default_factory=list)


class SystemMetricsReader:
    """Readings of every host under a profiler output directory, by time range.

    Reads finished and partial minutes, whoever wrote them (trainprobe's monitor, or SageMaker's
    files as smdebug reads them). Tolerates files being replaced while it reads: it parses only
    the bytes added since its last read of a minute, and reads a minute's ``.json`` file when its
    ``.partial`` file was renamed in between. Lines that are not a reading are skipped with one
    warning per file. ``cache_minutes`` host-minutes are kept parsed (least recently used first
    out), enough for rules that walk forward window by window.
    """

    def __init__(self, out_dir: str, *, cache_minutes: int = 64) -> None:
        self.out_dir = out_dir
        self.cache_minutes = cache_minutes
        self._parsed: OrderedDict[tuple[str, int], _Parsed] = OrderedDict()
        self._warned: set[str] = set()

    def minute_files(self) -> list[MinuteFile]:
        """Every host-minute on disk now, by minute then host."""
        root = join(self.out_dir, SYSTEM_METRICS_DIR)
        found: dict[tuple[int, str], dict[bool, str]] = {}
        for relative in files.list_files(root):
            parsed = parse_minute_file_name(relative)
            if parsed is not None:
                minute, node_id, partial = parsed
                found.setdefault((minute, node_id), {})[partial] = join(
                    SYSTEM_METRICS_DIR, relative
                )
        return [
            MinuteFile(node_id, minute, paths.get(False), paths.get(True))
            for (minute, node_id), paths in sorted(found.items())
        ]

    def events(
        self,
        start: float,
        end: float,
        unit: TimeUnit | str = TimeUnit.SECONDS,
        *,
        node_id: str | None = None,
    ) -> list[SystemMetric]:
        """Readings with ``start <= timestamp < end``, in time order (one host's, if given)."""
        scale = _seconds_per(unit)
        start_s, end_s = start * scale, end * scale
        found: list[SystemMetric] = []
        for entry in self.minute_files():
            if node_id is not None and entry.node_id != node_id:
                continue
            if not start_s - 60 - _SLACK_SECONDS < entry.minute < end_s + _SLACK_SECONDS:
                continue
            found.extend(
                event for event in self._read(entry).events if start_s <= event.timestamp < end_s
            )
        found.sort(key=lambda event: event.timestamp)
        return found

    def last_timestamp(self, node_id: str | None = None) -> float | None:
        """The time of the newest reading on disk (of one host, if given), or None."""
        newest: dict[str, MinuteFile] = {}
        for entry in self.minute_files():
            if node_id is None or entry.node_id == node_id:
                newest[entry.node_id] = entry
        times = [
            max(event.timestamp for event in events)
            for events in (self._read(entry).events for entry in newest.values())
            if events
        ]
        return max(times) if times else None

    def _read(self, entry: MinuteFile) -> _Parsed:
        key = (entry.node_id, entry.minute)
        parsed = self._parsed.pop(key, None) or _Parsed()
        self._parsed[key] = parsed
        while len(self._parsed) > self.cache_minutes:
            self._parsed.popitem(last=False)
        final = None if entry.final is None else join(self.out_dir, entry.final)
        if entry.partial is not None:
            partial = join(self.out_dir, entry.partial)
            # The partial file may be renamed to the final name at any moment.
            final = final or partial[: -len(PARTIAL_SUFFIX)] + FINAL_SUFFIX
            try:
                self._read_new(parsed, partial, finished=False)
                return parsed
            except FileNotFoundError:
                pass
        if final is not None:
            with contextlib.suppress(FileNotFoundError):
                self._read_new(parsed, final, finished=True)
        return parsed

    def _read_new(self, parsed: _Parsed, path: str, *, finished: bool) -> None:
        """Parse what ``path`` holds beyond ``parsed.offset``; a finished file to its very end."""
        size = files.size(path)
        if size < parsed.offset:  # a different run rewrote this minute: start over
            parsed.offset, parsed.events = 0, []
        if size == parsed.offset:
            return
        try:
            [view] = files.read_ranges(path, [(parsed.offset, size - parsed.offset)])
            chunk = bytes(view)
        except EOFError:  # replaced by a shorter file in between: start over
            parsed.offset, parsed.events = 0, []
            chunk = files.read_bytes(path)
        end = len(chunk) if finished else chunk.rfind(b"\n") + 1
        parsed.events.extend(self._parse(chunk[:end], path))
        parsed.offset += end

    def _parse(self, lines: bytes, path: str) -> list[SystemMetric]:
        events = []
        skipped = 0
        for line in lines.splitlines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                events.append(
                    SystemMetric(
                        str(row["Type"]),
                        str(row.get("Name") or ""),
                        str(row["Dimension"]),
                        float(row["Value"]),
                        str(row["NodeId"]),
                        float(row["Timestamp"]),
                    )
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                skipped += 1
        if skipped and path not in self._warned:
            self._warned.add(path)
            log.warning("skipped %d line(s) of %s that are not system metrics", skipped, path)
        return events


def _seconds_per(unit: TimeUnit | str) -> float:
    try:
        unit = TimeUnit(unit)
    except ValueError:
        allowed = [member.value for member in TimeUnit]
        raise ConfigError(
            "unit", unit, "'seconds' or 'microseconds'", suggestion=closest(str(unit), allowed)
        ) from None
    return 1.0 if unit is TimeUnit.SECONDS else 1e-6
