"""The monitor's loop: sample the host (and the training processes and GPUs) on a fixed cadence.

It wakes for the next sample, and at least every ``POLL_SECONDS`` in between, to see whether it
was asked to stop and whether the watched process still runs; at every wake it also looks at the
ProfilerConfig file (one ``stat``), so a new interval or ``DisableProfiler`` applies within one
interval. Samples keep a fixed rhythm; one that comes too late (the host was too busy) is skipped
rather than bunched. All readings of a sample share one timestamp, taken before the first read.

CPU (per core, I/O wait) and GPUs are read at every sample. Memory, disks, network and the
training processes are read at every sample too, but at most every ``RESOURCES_SECONDS``: at
100 ms that is every fifth sample. No rule needs them finer, their rates are steadier over the
longer span, and reading them costs most of a sample: this is what keeps the monitor under 1 % of
a core at 100 ms (``benchmarks/monitor_overhead.py``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from enum import Enum

import psutil

from trainprobe.capture.profiler_config_file import ProfilerConfigFile
from trainprobe.capture.system_monitor.gpus import Gpus
from trainprobe.capture.system_monitor.host import HostSampler
from trainprobe.capture.system_monitor.process_tree import ProcessTree
from trainprobe.capture.system_monitor.settings import MonitorSettings, check_interval
from trainprobe.storage.system_metrics import Reading, SystemMetricsWriter, check_node_id

__all__ = ["POLL_SECONDS", "RESOURCES_SECONDS", "Outcome", "SystemMonitor"]

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
RESOURCES_SECONDS = 0.5


class Outcome(Enum):
    """Why ``SystemMonitor.run`` returned."""

    STOPPED = "stopped"
    PROCESS_EXITED = "process exited"


class SystemMonitor:
    """One host's system monitor, writing to ``<out_dir>/system/incremental/``.

    ``pid`` is the training process to watch: its tree is sampled, and the monitor ends when it
    exits. ``config`` is the watched ProfilerConfig file, whose settings replace ``settings``.
    """

    def __init__(
        self,
        out_dir: str,
        *,
        node_id: str = "algo-1",
        settings: MonitorSettings | None = None,
        pid: int | None = None,
        config: ProfilerConfigFile[MonitorSettings] | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.node_id = check_node_id(node_id)
        self.settings = settings or MonitorSettings()
        check_interval(self.settings.interval_ms)
        self.pid = pid
        self.config = config
        self.samples = 0
        self._write_failed = False

    def run(self, stop: threading.Event) -> Outcome:
        """Sample until ``stop`` is set or the watched process exits; the files are then final."""
        tree = None
        if self.pid is not None:
            try:
                tree = ProcessTree(self.pid)
            except psutil.Error:
                log.info("process %d is not running: nothing to monitor", self.pid)
                return Outcome.PROCESS_EXITED
        writer = SystemMetricsWriter(self.out_dir, self.node_id)
        gpus = Gpus.open()
        loop = _Loop(self, writer, HostSampler(), tree, gpus)
        try:
            return loop.run(stop)
        finally:
            self.write_safely(writer.close)
            if gpus is not None:
                gpus.close()

    def write_safely(self, write: Callable[[], None]) -> None:
        """Run a write; a full or unwritable disk is logged once and the monitor keeps going."""
        try:
            write()
        except OSError as error:
            if not self._write_failed:
                self._write_failed = True
                log.warning("cannot write system metrics to %s: %s", self.out_dir, error)


class _Loop:
    """The state of one run: settings in force, when the next sample is due."""

    def __init__(
        self,
        monitor: SystemMonitor,
        writer: SystemMetricsWriter,
        host: HostSampler,
        tree: ProcessTree | None,
        gpus: Gpus | None,
    ) -> None:
        self.monitor = monitor
        self.writer = writer
        self.host = host
        self.tree = tree
        self.gpus = gpus
        self.settings = monitor.settings
        self.last_sample = time.monotonic()
        self.next_sample = self.last_sample + self.settings.interval_ms / 1000
        self.since_resources = math.inf

    def run(self, stop: threading.Event) -> Outcome:
        while not stop.is_set():
            now = time.monotonic()
            if self.monitor.config is not None:
                self._apply(self.monitor.config.changed(), now)
            if self.tree is not None and not self.tree.running():
                return Outcome.PROCESS_EXITED
            interval = self.settings.interval_ms / 1000
            if self.settings.enabled and now >= self.next_sample:
                self.last_sample = now
                self._sample()
                self.next_sample += interval
                if self.next_sample <= time.monotonic():
                    self.next_sample = time.monotonic() + interval
            wake = now + POLL_SECONDS
            if self.settings.enabled:
                wake = min(wake, self.next_sample)
            stop.wait(max(0.0, wake - time.monotonic()))
        return Outcome.STOPPED

    def _apply(self, new: MonitorSettings | None, now: float) -> None:
        """Switch to ``new`` settings read from the config file, if they differ."""
        if new is None or new == self.settings:
            return
        log.info(
            "system monitoring now %s", f"every {new.interval_ms} ms" if new.enabled else "off"
        )
        if not new.enabled:
            self.monitor.write_safely(self.writer.close)
        elif not self.settings.enabled:
            self.host.restart()
            if self.tree is not None:
                self.tree.restart()
            self.since_resources = math.inf
            self.last_sample = now
        self.next_sample = self.last_sample + new.interval_ms / 1000
        self.settings = new

    def _sample(self) -> None:
        timestamp = time.time()
        readings: list[Reading] = self.host.cpu()
        if self.gpus is not None:
            readings += self.gpus.sample()
        self.since_resources += self.settings.interval_ms / 1000
        if self.since_resources >= RESOURCES_SECONDS - 1e-9:
            self.since_resources = 0.0
            readings += self.host.resources()
            if self.tree is not None:
                readings += self.tree.sample()
        self.monitor.write_safely(lambda: self.writer.write(timestamp, readings))
        self.monitor.samples += 1
