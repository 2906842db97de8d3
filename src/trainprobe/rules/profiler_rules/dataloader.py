"""Dataloader: too few or too many data loader processes for the host's CPU cores.

It reads the data loader events of the framework timeline (reference/smdebug.md §5.1, §5.3):
``DataLoaderWorker`` (a worker process loading a batch; ``pid`` is the worker's) and
``DataLoaderIter`` (the training waiting for a batch). For each second with data loading, it
counts the loading processes that ran in it: the distinct worker pids (seconds in which no worker
loaded do not count), or one (the training process itself) for a loader without workers. A second
is counted once complete (every event overlapping it has started). Once more than ``patience``
such seconds are in, a window whose seconds have a median count below ``min_threshold`` % or above
``max_threshold`` % of the host's cores is a violation, and the rule fires in it. The report and
its recommendation go by the median over all the seconds so far. The cores are
counted from the host's system metrics (its ``cpuN`` readings).

The report also keeps the loaders' settings (num_workers, pin_memory, prefetch_factor) and how long
the training waited for its batches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.statistics import ValueSeries, histogram, summary
from trainprobe.rules.profiler_rules.window import Window, is_core
from trainprobe.storage.system_metrics import CPU_UTILIZATION
from trainprobe.storage.trace_file import TraceEvent

__all__ = ["Dataloader", "cores_of"]

WORKER_PHASE = "DataLoaderWorker"
WAIT_PHASE = "DataLoaderIter"
_TOO_FEW, _TOO_MANY = "too few", "too many"


def cores_of(node_id: str, cores: Mapping[str, int]) -> int | None:
    """The cores of the host a framework node runs on (``0-algo-1`` runs on ``algo-1``): the
    host whose name ends the node's, else the only host, else None."""
    for host, count in cores.items():
        if node_id == host or node_id.endswith(f"-{host}"):
            return count
    if len(cores) == 1:
        return next(iter(cores.values()))
    return None


class Dataloader(WindowRule):
    """Fires when too few or too many data loader processes run for the CPU cores available."""

    rule_name = "Dataloader"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        self.cores: dict[str, int] = {}
        self.parallel: dict[str, ValueSeries] = {}
        self.settings: dict[str, dict[str, Any]] = {}
        self.waits = ValueSeries()
        self.judged: dict[str, dict[str, Any]] = {}
        self.framework_expected = True
        self._workers: dict[str, dict[int, set[object]]] = {}
        self._waiting: dict[str, set[int]] = {}

    def evaluate_window(self, window: Window) -> bool:
        self.framework_expected = window.framework_expected
        for sample in window.samples():
            count = len(sample.values(CPU_UTILIZATION, is_core))
            if count:
                self.cores[sample.node_id] = max(self.cores.get(sample.node_id, 0), count)
        for event in window.framework:
            if event.phase == WORKER_PHASE:
                self._settings(event)
                pid = event.args.get("pid", event.tid)
                seconds = self._workers.setdefault(event.node_id, {})
                for second in _seconds(event):
                    seconds.setdefault(second, set()).add(pid)
            elif event.phase == WAIT_PHASE:
                self._settings(event)
                self.waits.append(event.duration_us / 1e6)
                self._waiting.setdefault(event.node_id, set()).update(_seconds(event))
        # A second is complete once every event that overlaps it has started: at its end.
        complete = math.inf if window.final else window.end_us // 1_000_000
        fired = False
        for node in sorted(set(self._workers) | set(self._waiting)):
            workers = self._workers.get(node, {})
            waiting = self._waiting.get(node, set())
            done_workers = {s: pids for s, pids in workers.items() if s < complete}
            done_waiting = {s for s in waiting if s < complete}
            for second in done_workers:
                del workers[second]
            waiting -= done_waiting
            fired = self._judge(node, done_workers, done_waiting) or fired
        self.report.datapoints = sum(len(series) for series in self.parallel.values())
        self.report.details = {
            "nodes": {node: dict(found) for node, found in sorted(self.judged.items())},
            "settings": {node: dict(found) for node, found in sorted(self.settings.items())},
            "cores": dict(sorted(self.cores.items())),
            "batch_wait_s": summary(self.waits.values()),
            "batch_wait_histogram_s": histogram(self.waits.values(), 100),
        }
        return fired

    def _settings(self, event: TraceEvent) -> None:
        found = self.settings.setdefault(event.node_id, {})
        for key in ("num_workers", "pin_memory", "prefetch_factor"):
            if key in event.args:
                found[key] = event.args[key]

    def _judge(self, node: str, workers: dict[int, set[object]], waiting: set[int]) -> bool:
        has_workers = bool(workers) or bool(self.settings.get(node, {}).get("num_workers"))
        # Workers load ahead of the training: only the seconds in which some loaded count.
        seconds = sorted(workers) if has_workers else sorted(waiting)
        counts = [len(workers[second]) if has_workers else 1 for second in seconds]
        every = self.parallel.setdefault(node, ValueSeries())
        every.extend(counts)
        cores = cores_of(node, self.cores)
        state = self.judged.setdefault(node, {"violations": 0})
        state.update(cores=cores, seconds=len(every))
        if cores is None or len(every) <= self.count("patience"):
            return False
        low = cores * self.number("min_threshold") / 100.0
        high = cores * self.number("max_threshold") / 100.0
        overall = float(np.median(every.values()))
        state.update(
            median_parallel=overall, least=low, most=high, status=_status(overall, low, high)
        )
        if not counts:
            return False
        median = float(np.median(counts))
        state["window_median_parallel"] = median
        if low <= median <= high:
            return False
        state["violations"] += 1
        self.report.violations += 1
        self.record(
            f"{median:g} data loader processes in parallel on {node} ({cores} cores): "
            f"{_status(median, low, high)}",
            median,
            low if median < low else high,
        )
        return True

    def recommendation(self) -> str:
        if not self.judged:
            if not self.framework_expected:
                return "The job records no framework events: enable data loader profiling."
            return (
                "No data loader events yet: enable data loader profiling "
                "(DataloaderProfilingConfig) over enough steps for the rule to judge."
            )
        node, state = max(self.judged.items(), key=lambda item: item[1]["violations"])
        settings = self.settings.get(node, {})
        workers = settings.get("num_workers")
        now = f" (it is {workers})" if workers is not None else ""
        if "median_parallel" not in state:
            if state.get("cores") is None:
                return f"The CPU cores of {node} are unknown: the rule needs its system metrics."
            return (
                f"{state['seconds']} seconds of data loading so far; the rule judges after "
                f"{self.count('patience')}."
            )
        median, cores = state["median_parallel"], state["cores"]
        advice = ""
        if settings.get("pin_memory") is False:
            advice = " With a GPU, also set pin_memory=True to speed up copies to it."
        if state["status"] == _TOO_FEW:
            return (
                f"Only {median:g} data loader process(es) ran in parallel (median) on {node}, "
                f"which has {cores} cores; {math.ceil(state['least'])} to "
                f"{math.floor(state['most'])} would use them: increase num_workers of your "
                f"DataLoader{now}." + advice
            )
        if state["status"] == _TOO_MANY:
            return (
                f"{median:g} data loader processes ran in parallel (median) on {node}, which has "
                f"{cores} cores: they compete for the CPU with each other and the training. "
                f"Decrease num_workers of your DataLoader{now} to at most "
                f"{math.floor(state['most'])}." + advice
            )
        return (
            f"{median:g} data loader process(es) ran in parallel (median) on {node} with {cores} "
            "cores: a good number." + advice
        )


def _status(median: float, low: float, high: float) -> str:
    return _TOO_FEW if median < low else _TOO_MANY if median > high else "fine"


def _seconds(event: TraceEvent) -> range:
    """The whole seconds (since the epoch) an event overlaps."""
    first = int(event.start_us // 1_000_000)
    last = int(max(event.end_us - 1, event.start_us) // 1_000_000)
    return range(first, last + 1)
