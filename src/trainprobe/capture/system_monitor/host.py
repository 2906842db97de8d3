"""What the host is doing, read with psutil: CPU per core, I/O wait, memory, disks and network.

Utilisation and rates are measured between two samples from the kernel's counters (``/proc/stat``
and friends on Linux), so one sample costs a handful of file reads and no waiting. The CPU split
follows psutil's ``cpu_percent``: busy is everything but idle and I/O wait (steal included), over
all the time the core accounted (guest time is already inside user time). Disk throughput sums the
whole disks (not their partitions again); network throughput sums every interface but loopback.
Counters are read without psutil's wrap-around bookkeeping (64-bit on Linux), which halves their
cost; a counter that goes backwards drops that reading.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import psutil

from trainprobe.storage import system_metrics as sm
from trainprobe.storage.system_metrics import Reading

__all__ = ["HostSampler"]

log = logging.getLogger(__name__)

MEMORY_PERCENT = sm.MetricKey(sm.MEMORY, sm.MEMORY_USED_PERCENT, "")
MEMORY_BYTES = sm.MetricKey(sm.HOST, sm.MEMORY_USED_BYTES, "")
DISK_READ = sm.MetricKey(sm.IO, sm.READ_BYTES_PER_SECOND, "")
DISK_WRITE = sm.MetricKey(sm.IO, sm.WRITE_BYTES_PER_SECOND, "")
DISK_IOPS = sm.MetricKey(sm.IO, sm.IOPS, "")
NETWORK_RECEIVE = sm.MetricKey(sm.NETWORK, sm.RECEIVE_BYTES_PER_SECOND, sm.ALGORITHM)
NETWORK_TRANSMIT = sm.MetricKey(sm.NETWORK, sm.TRANSMIT_BYTES_PER_SECOND, sm.ALGORITHM)


class HostSampler:
    """The host's readings since the previous sample (or since ``restart()``).

    CPU and the other resources are sampled apart (``cpu()`` and ``resources()``), each measured
    since its own previous call, so that a monitor can read the cheap, fast-moving CPU counters
    more often than memory, disks and network.
    """

    def __init__(self) -> None:
        self._loopback = _loopback_interfaces()
        self._whole_disks: dict[str, bool] = {}
        self._failed: set[str] = set()
        self._cpu_keys: list[tuple[sm.MetricKey, sm.MetricKey]] = []
        self._total_keys = _cpu_keys(sm.CPU_TOTAL)
        self.restart()

    def restart(self) -> None:
        """Forget the previous counters: the next samples measure from now."""
        self._cpu = self._read("cpu", lambda: psutil.cpu_times(percpu=True))
        self._disk = self._read("disk", self._disk_totals)
        self._net = self._read("network", self._network_totals)
        self._resources_at = time.monotonic()

    def cpu(self) -> list[Reading]:
        """Busy and I/O-wait percentages of every core, and their means, since the last call."""
        cpu = self._read("cpu", lambda: psutil.cpu_times(percpu=True))
        readings = []
        if cpu is not None and self._cpu is not None:
            readings = self._cpu_readings(self._cpu, cpu)
        self._cpu = cpu
        return readings

    def resources(self) -> list[Reading]:
        """Memory in use now; disk and network throughput since the last call."""
        now = time.monotonic()
        elapsed, self._resources_at = now - self._resources_at, now
        readings: list[Reading] = []
        memory = self._read("memory", psutil.virtual_memory)
        if memory is not None and memory.total > 0:
            used = memory.total - memory.available
            readings += [(MEMORY_PERCENT, used / memory.total * 100.0), (MEMORY_BYTES, used)]
        disk = self._read("disk", self._disk_totals)
        if disk is not None and self._disk is not None and elapsed > 0:
            readings += _disk_readings(self._disk, disk, elapsed)
        self._disk = disk
        net = self._read("network", self._network_totals)
        if net is not None and self._net is not None and elapsed > 0:
            received, sent = net[0] - self._net[0], net[1] - self._net[1]
            if received >= 0 and sent >= 0:
                readings += [
                    (NETWORK_RECEIVE, received / elapsed),
                    (NETWORK_TRANSMIT, sent / elapsed),
                ]
        self._net = net
        return readings

    def _cpu_readings(self, before: list[Any], after: list[Any]) -> list[Reading]:
        if len(before) != len(after):  # a core came or went: measure from the next sample
            return []
        if len(self._cpu_keys) != len(after):
            self._cpu_keys = [_cpu_keys(f"cpu{index}") for index in range(len(after))]
        busy: list[Reading] = []
        waiting: list[Reading] = []
        for (busy_key, wait_key), old, new in zip(self._cpu_keys, before, after, strict=True):
            total = _accounted(new) - _accounted(old)
            if total <= 0:  # no clock tick yet on this core: no reading this time
                return []
            wait = getattr(new, "iowait", 0.0) - getattr(old, "iowait", 0.0)
            busy.append((busy_key, _percent(total - (new.idle - old.idle) - wait, total)))
            waiting.append((wait_key, _percent(wait, total)))
        busy.append((self._total_keys[0], sum(value for _, value in busy) / len(after)))
        if not hasattr(after[0], "iowait"):
            return busy
        waiting.append((self._total_keys[1], sum(value for _, value in waiting) / len(after)))
        return busy + waiting

    def _disk_totals(self) -> tuple[int, int, int] | None:
        """(bytes read, bytes written, operations) over all whole disks, partitions left out."""
        # perdisk=True without wrap tracking costs about half of psutil's own totals.
        disks = psutil.disk_io_counters(perdisk=True, nowrap=False)
        if not disks:
            return None
        read = written = operations = 0
        for name, counters in disks.items():
            whole = self._whole_disks.get(name)
            if whole is None:
                whole = self._whole_disks[name] = _is_whole_disk(name)
            if whole:
                read += counters.read_bytes
                written += counters.write_bytes
                operations += counters.read_count + counters.write_count
        return read, written, operations

    def _network_totals(self) -> tuple[int, int]:
        received = sent = 0
        for name, counters in psutil.net_io_counters(pernic=True, nowrap=False).items():
            if name not in self._loopback:
                received += counters.bytes_recv
                sent += counters.bytes_sent
        return received, sent

    def _read(self, part: str, read: Callable[[], Any]) -> Any:
        """``read()``, or None (logged once per part) when the platform cannot tell."""
        try:
            return read()
        except (psutil.Error, OSError, RuntimeError, NotImplementedError) as error:
            if part not in self._failed:
                self._failed.add(part)
                log.info("no %s metrics on this host: %s", part, error)
            return None


def _cpu_keys(name: str) -> tuple[sm.MetricKey, sm.MetricKey]:
    return (
        sm.MetricKey(sm.CPU, name, sm.CPU_UTILIZATION),
        sm.MetricKey(sm.CPU, name, sm.IO_WAIT_PERCENTAGE),
    )


def _accounted(times: Any) -> float:
    """All the time a core accounted; guest time is already counted in user time on Linux."""
    total = float(sum(times))
    return total - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)


def _percent(part: float, total: float) -> float:
    return min(100.0, max(0.0, part / total * 100.0))


def _disk_readings(
    before: tuple[int, int, int], after: tuple[int, int, int], elapsed: float
) -> list[Reading]:
    read, written, operations = (new - old for new, old in zip(after, before, strict=True))
    if min(read, written, operations) < 0:  # counters were reset, or a disk went away
        return []
    return [
        (DISK_READ, read / elapsed),
        (DISK_WRITE, written / elapsed),
        (DISK_IOPS, operations / elapsed),
    ]


def _is_whole_disk(name: str) -> bool:
    """Whether a disk psutil lists is a whole device rather than a partition (counted in it).

    Linux lists whole devices in /sys/block; elsewhere psutil lists whole disks only.
    """
    if not os.path.isdir("/sys/block"):
        return True
    return os.path.exists("/sys/block/" + name.replace("/", "!"))


def _loopback_interfaces() -> frozenset[str]:
    """Names of the loopback interfaces, whose traffic never leaves the host."""
    try:
        stats = psutil.net_if_stats()
    except (psutil.Error, OSError):
        return frozenset({"lo"})
    return frozenset(
        name
        for name, stat in stats.items()
        if "loopback" in getattr(stat, "flags", "").split(",") or name == "lo"
    )
