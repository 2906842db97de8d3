"""One window of a job's profiling data: the system readings and framework events of a time span.

Profiler rules see a job as consecutive windows ``[start_us, end_us)`` of ``scan_interval_us``
microseconds from the job's first data (smdebug's rules walked time the same way). A window holds
the system readings taken in it and the framework events that started in it, so a rule that walks
window after window sees every reading and every event exactly once.

``Window.samples()`` groups the readings into *samples*: the readings of one host taken at one
moment (the monitor stamps them all with one timestamp; readings less than 20 ms apart are taken as
one moment, as smdebug's rules did). A sample is what the rules call a datapoint.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trainprobe.storage.system_metrics import CPU_TOTAL, SystemMetric
from trainprobe.storage.trace_file import TraceEvent

__all__ = ["NO_FRAMEWORK_EVENTS", "SAME_SAMPLE_SECONDS", "Sample", "Window", "is_core", "is_gpu"]

NO_FRAMEWORK_EVENTS = (
    "The job records no framework events: enable framework profiling "
    "(ProfilerConfig(framework_profile_params=FrameworkProfile())) for this rule to time steps."
)
"""What a rule that times steps says when ``Window.framework_expected`` is False."""

SAME_SAMPLE_SECONDS = 0.02


def is_core(name: str) -> bool:
    """Whether a CPU reading's name is one core's (``cpu3``), not the total."""
    return name.startswith("cpu") and name != CPU_TOTAL and name[3:].isdigit()


def is_gpu(name: str) -> bool:
    """Whether a reading's name is one GPU's (``gpu0``)."""
    return name.startswith("gpu") and name[3:].isdigit()


@dataclass(frozen=True)
class Sample:
    """The readings of one host at one moment (``timestamp`` in seconds since the epoch)."""

    node_id: str
    timestamp: float
    readings: tuple[SystemMetric, ...]

    def values(
        self, dimension: str, name: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float]]:
        """(name, value) of the readings of ``dimension`` whose name ``name`` accepts."""
        return [
            (reading.name, reading.value)
            for reading in self.readings
            if reading.dimension == dimension and (name is None or name(reading.name))
        ]

    def value(self, dimension: str, name: str) -> float | None:
        """The value of one reading, or None when the sample has none of that name."""
        for reading in self.readings:
            if reading.dimension == dimension and reading.name == name:
                return reading.value
        return None


@dataclass(frozen=True)
class Window:
    """Window ``index`` (from 0) of a job: ``[start_us, end_us)`` in microseconds since the epoch.

    ``job_start_us`` is the time of the job's first data. ``final`` says the job has ended and no
    window follows this one. ``framework_expected`` is False when the job is known to record no
    framework events (no framework profiling): rules that time steps then do not judge.
    """

    index: int
    start_us: float
    end_us: float
    system: Sequence[SystemMetric]
    framework: Sequence[TraceEvent]
    job_start_us: float
    final: bool = False
    framework_expected: bool = True
    _samples: list[Sample] = field(default_factory=list, compare=False, repr=False)

    def samples(self) -> list[Sample]:
        """The window's readings grouped into samples, per host, in time order."""
        if self.system and not self._samples:
            self._samples.extend(group_samples(self.system))
        return self._samples


def group_samples(readings: Sequence[SystemMetric]) -> list[Sample]:
    """``readings`` grouped per host into samples (see the module docstring), by time."""
    by_node: dict[str, list[SystemMetric]] = defaultdict(list)
    for reading in readings:
        by_node[reading.node_id].append(reading)
    samples: list[Sample] = []
    for node_id, node_readings in by_node.items():
        node_readings.sort(key=lambda reading: reading.timestamp)
        group: list[SystemMetric] = []
        for reading in node_readings:
            if group and reading.timestamp - group[0].timestamp > SAME_SAMPLE_SECONDS:
                samples.append(Sample(node_id, group[0].timestamp, tuple(group)))
                group = []
            group.append(reading)
        if group:
            samples.append(Sample(node_id, group[0].timestamp, tuple(group)))
    samples.sort(key=lambda sample: (sample.timestamp, sample.node_id))
    return samples
