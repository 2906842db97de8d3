"""Every system reading of a profiler output at once, as one time series per host and metric.

The rules walk the readings window by window, as objects (``SystemMetricsReader``). A report wants
all of them at once, and a long job on a large host has millions: 8 hours at 500 ms with 32 cores
and 8 GPUs is over 5 million lines. Parsing each into an object would take most of a minute and
gigabytes, so this reads each minute file with one pattern for the layout that every writer of the
format uses (SageMaker's keys, in SageMaker's order, as ``system_metrics`` documents, with or
without spaces after the separators) and keeps the numbers in numpy arrays. A line in any other
layout is parsed as JSON; one that is not a reading is skipped with a warning, as the reader does.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from trainprobe.storage import files
from trainprobe.storage.locations import join
from trainprobe.storage.system_metrics import (
    PARTIAL_SUFFIX,
    MetricKey,
    MinuteFile,
    SystemMetricsReader,
)

__all__ = ["MetricSeries", "read_metric_series"]

log = logging.getLogger(__name__)

_LINE = re.compile(
    rb'\{("Type": ?"[^"\\]*", ?"Name": ?"[^"\\]*", ?"Dimension": ?"[^"\\]*"), ?'
    rb'"Value": ?([^,]+), ?"NodeId": ?("[^"\\]*"), ?"Timestamp": ?([^,}]+)\}'
)

Floats = npt.NDArray[np.float64]
_Columns = dict[tuple[str, bytes], tuple[Floats, Floats]]

MAX_PROCESSES = 4
PARALLEL_FROM_MINUTES = 30
"""Jobs with fewer host-minutes than this are parsed in the calling process: starting
processes would cost more than it saves."""


@dataclass(frozen=True)
class MetricSeries:
    """One metric of one host over the whole job, in time order."""

    node_id: str
    key: MetricKey
    timestamps: Floats
    """Seconds since the epoch."""
    values: Floats


def read_metric_series(profiler_output: str, *, processes: int | None = None) -> list[MetricSeries]:
    """Every metric of every host under ``profiler_output``, by host, then Type, Name and
    Dimension; the minute being written is included.

    A long job's minute files are parsed by ``processes`` processes at once (default: one per
    core, at most ``MAX_PROCESSES``); a short job's, or where processes cannot start, here.
    """
    minutes = [
        _candidates(profiler_output, entry)
        for entry in SystemMetricsReader(profiler_output).minute_files()
    ]
    workers = processes if processes is not None else min(os.cpu_count() or 1, MAX_PROCESSES)
    if workers > 1 and len(minutes) >= PARALLEL_FROM_MINUTES:
        parsed = _parse_in_processes(minutes, workers)
    else:
        parsed = [_read_minute(candidates) for candidates in minutes]
    keys: dict[bytes, MetricKey] = {}
    parts: dict[tuple[str, MetricKey], tuple[list[Floats], list[Floats]]] = {}
    for columns in parsed:
        for (node_id, key_bytes), (times, values) in columns.items():
            key = keys.get(key_bytes)
            if key is None:
                row = json.loads(b"{" + key_bytes + b"}")
                key = keys[key_bytes] = MetricKey(
                    str(row["Type"]), str(row.get("Name") or ""), str(row["Dimension"])
                )
            times_parts, values_parts = parts.setdefault((node_id, key), ([], []))
            times_parts.append(times)
            values_parts.append(values)
    found = []
    for (node_id, key), (times_parts, values_parts) in sorted(parts.items()):
        timestamps = np.concatenate(times_parts)
        values = np.concatenate(values_parts)
        order = np.argsort(timestamps, kind="stable")
        found.append(MetricSeries(node_id, key, timestamps[order], values[order]))
    return found


def _candidates(profiler_output: str, entry: MinuteFile) -> list[str]:
    """Where a host-minute's bytes are: its finished file, or the partial one being written
    (which may become the finished one while we look)."""
    paths = [entry.final, entry.partial]
    if entry.final is None and entry.partial is not None:
        paths.append(entry.partial[: -len(PARTIAL_SUFFIX)] + ".json")
    return [join(profiler_output, path) for path in paths if path is not None]


def _read_minute(candidates: list[str]) -> _Columns:
    """The readings of one host-minute, from the first of its files still there."""
    for path in candidates:
        try:
            data = files.read_bytes(path)
        except FileNotFoundError:
            continue
        return _parse(data, path)
    return {}


def _parse_in_processes(minutes: list[list[str]], workers: int) -> list[_Columns]:
    context = multiprocessing.get_context("spawn")  # safe beside threads, unlike fork
    try:
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            return list(pool.map(_read_minute, minutes, chunksize=8))
    except (OSError, BrokenProcessPool) as error:
        log.warning("parsing the system metrics in this process alone: %s", error)
        return [_read_minute(candidates) for candidates in minutes]


def _parse(data: bytes, path: str) -> _Columns:
    """One minute file's readings, grouped by host and metric."""
    rows = _LINE.findall(data)
    lines = data.count(b"\n") + (not data.endswith(b"\n") and bool(data.strip()))
    if len(rows) != lines:
        rows = _parse_line_by_line(data, path)
    if not rows:
        return {}
    keys, values, nodes, times = zip(*rows, strict=True)
    labels = list(zip(nodes, keys, strict=True))
    code_of = {label: code for code, label in enumerate(dict.fromkeys(labels))}
    codes = np.fromiter(map(code_of.__getitem__, labels), dtype=np.intp, count=len(labels))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(code_of) + 1))
    sorted_times = np.array(times, dtype=np.bytes_).astype(np.float64)[order]
    sorted_values = np.array(values, dtype=np.bytes_).astype(np.float64)[order]
    return {
        (json.loads(node), key): (
            sorted_times[bounds[code] : bounds[code + 1]],
            sorted_values[bounds[code] : bounds[code + 1]],
        )
        for (node, key), code in code_of.items()
    }


def _parse_line_by_line(data: bytes, path: str) -> list[tuple[bytes, bytes, bytes, bytes]]:
    """The readings of a file whose lines are not all in the usual layout."""
    rows = []
    skipped = 0
    for line in data.splitlines():
        if not line.strip():
            continue
        match = _LINE.fullmatch(line.strip())
        if match is not None:
            key, value, node, timestamp = match.groups()
            rows.append((key, value, node, timestamp))
            continue
        try:
            row = json.loads(line)
            key = {"Type": str(row["Type"]), "Name": str(row.get("Name") or "")}
            key["Dimension"] = str(row["Dimension"])
            rows.append(
                (
                    json.dumps(key, separators=(",", ":"))[1:-1].encode(),
                    repr(float(row["Value"])).encode(),
                    json.dumps(str(row["NodeId"])).encode(),
                    repr(float(row["Timestamp"])).encode(),
                )
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            skipped += 1
    if skipped:
        log.warning("skipped %d line(s) of %s that are not system metrics", skipped, path)
    return rows
