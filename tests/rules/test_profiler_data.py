"""Profiler data for the profiler rule tests, made as a job makes it, and the trial reading it.

The other ``test_profiler_*`` files take their data from here:

- ``write_system``: system metrics synthesized in the real format (``SystemMetricsWriter``), for
  what this machine cannot measure (GPUs, I/O wait: its disks show next to none);
- ``Monitor``: the real system monitor, ``python -m trainprobe.capture.system_monitor``, as a
  process; ``fake_gpus`` puts a stand-in ``pynvml`` module in front of the real one for it, so
  that it sees GPUs at a set utilization (the fake sits at the NVML boundary only);
- ``train``: a real PyTorch training whose FrameworkProfiler writes the step timeline;
- ``follow``: the profiler rule runner following the job from a thread, as the job runner runs it;
- ``report_of`` and ``status_of``: what a rule wrote.

Its own tests check the ``ProfilerTrial``: windows, when their data is complete, the job's end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from trainprobe.capture.pytorch.profiling import FrameworkProfiler
from trainprobe.config.framework_profile import TraceFileSettings
from trainprobe.config.metrics_config import StepWindow
from trainprobe.config.profiler_config import ProfilingPlan
from trainprobe.rules.profiler_rules import (
    ProfilerRuleDefinition,
    ProfilerRuleRunner,
    ProfilerTrial,
)
from trainprobe.rules.verdict import Verdict
from trainprobe.storage.job_layout import rule_report_file
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.rule_output import read_status
from trainprobe.storage.system_metrics import MetricKey, SystemMetricsReader, SystemMetricsWriter
from trainprobe.storage.trace_file import TraceFileWriter

T0 = 1_700_000_040.0
"""When synthesized jobs start (seconds since the epoch; a minute boundary)."""

Row = tuple[str, str, str, float]
"""One reading: Type, Name, Dimension, Value."""


# ----- synthesized system metrics ------------------------------------------------------------


def host(
    cpu: float = 20.0,
    iowait: float = 0.0,
    gpus: Sequence[tuple[float, float]] = (),
    cores: int = 2,
) -> list[Row]:
    """One sample of a host: every core at ``cpu`` %, ``iowait`` % I/O wait, and GPUs at
    (utilization %, memory %)."""
    rows: list[Row] = []
    for name in [f"cpu{core}" for core in range(cores)] + ["cpu_total"]:
        rows.append(("cpu", name, "CPUUtilization", cpu))
        rows.append(("cpu", name, "I/OWaitPercentage", iowait))
    rows.append(("memory", "MemoryUsedPercent", "", 35.0))
    for index, (utilization, memory) in enumerate(gpus):
        rows.append(("gpu", f"gpu{index}", "GPUUtilization", utilization))
        rows.append(("gpu", f"gpu{index}", "GPUMemoryUtilization", memory))
    return rows


def write_system(
    profiler_out: Path,
    samples: Iterable[list[Row]],
    *,
    interval: float = 0.1,
    start: float = T0,
    node: str = "algo-1",
) -> float:
    """Write one sample every ``interval`` seconds from ``start``; the time after the last."""
    writer = SystemMetricsWriter(str(profiler_out), node, publish_seconds=0.0)
    count = 0
    for count, rows in enumerate(samples, start=1):
        at = round(start + (count - 1) * interval, 6)
        writer.write(at, [(MetricKey(t, n, d), v) for t, n, d, v in rows])
    writer.close()
    return round(start + count * interval, 6)


def end_job(profiler_out: Path) -> None:
    """Mark the job as ended, as the job runner does once the training and the monitor exit."""
    (profiler_out / "training_job_end.ts").write_bytes(b"")


# ----- the real system monitor ----------------------------------------------------------------

_FAKE_NVML = '''
"""A stand-in for pynvml: {count} GPU(s) at {utilization} % busy, {memory} % of memory used."""

NVML_TEMPERATURE_GPU = 0
NVML_ERROR_NOT_SUPPORTED = 3


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value


class _Values:
    def __init__(self, **values):
        self.__dict__.update(values)


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlDeviceGetCount():
    return {count}


def nvmlDeviceGetHandleByIndex(index):
    return index


def nvmlDeviceGetUtilizationRates(handle):
    return _Values(gpu={utilization}, memory=1)


def nvmlDeviceGetMemoryInfo(handle):
    return _Values(total=100 * 2**20, used={memory} * 2**20)


def nvmlDeviceGetPowerUsage(handle):
    return 70000


def nvmlDeviceGetTemperature(handle, sensor):
    return 40
'''


def fake_gpus(directory: Path, utilization: int, memory: int = 20, count: int = 1) -> Path:
    """A directory holding a stand-in ``pynvml`` whose GPUs show the given figures."""
    directory.mkdir(parents=True, exist_ok=True)
    source = _FAKE_NVML.format(count=count, utilization=utilization, memory=memory)
    (directory / "pynvml.py").write_text(textwrap.dedent(source))
    return directory


class Monitor:
    """The system monitor as a process, sampling every 100 ms into ``profiler_out``."""

    def __init__(self, profiler_out: Path, nvml: Path | None = None) -> None:
        self.profiler_out = profiler_out
        env = dict(os.environ)
        if nvml is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(nvml), env.get("PYTHONPATH", "")])
        command = [sys.executable, "-m", "trainprobe.capture.system_monitor"]
        self.process = subprocess.Popen(
            [*command, "--out", str(profiler_out), "--interval-ms", "100"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def wait_for_samples(self, count: int, timeout: float = 60.0) -> None:
        """Wait until the monitor has published ``count`` samples."""
        reader = SystemMetricsReader(str(self.profiler_out))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            readings = reader.events(0, 1e12)
            if len({reading.timestamp for reading in readings}) >= count:
                return
            assert self.process.poll() is None, self.process.stderr
            time.sleep(0.1)
        raise AssertionError(f"the monitor did not publish {count} samples in {timeout} s")

    def stop(self) -> None:
        """Stop it as the job runner does (SIGTERM); it finishes its minute file and exits 0."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=30) == 0


@contextmanager
def monitored(profiler_out: Path, nvml: Path | None = None) -> Iterator[Monitor]:
    """A running monitor (with its first samples out) for the duration of the block."""
    monitor = Monitor(profiler_out, nvml)
    try:
        monitor.wait_for_samples(2)
        yield monitor
    finally:
        monitor.stop()


# ----- a real training -----------------------------------------------------------------------

NODE = "0-algo-1"
FEATURES, CLASSES = 8, 4


def spin(seconds: float) -> None:
    """Keep this thread on the CPU for ``seconds`` of its own time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Items(Dataset[tuple[torch.Tensor, int]]):
    """Random items, each costing ``cost`` seconds of CPU to make (decoding, augmenting)."""

    def __init__(self, count: int, cost: float) -> None:
        self.count, self.cost = count, cost
        self.features = torch.randn(count, FEATURES, generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self.cost:
            spin(self.cost)
        return self.features[index], index % CLASSES


class Net(nn.Module):
    """A linear layer whose forward sleeps ``pause`` seconds (the GPU's work, say)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(FEATURES, CLASSES)
        self.pause = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pause:
            time.sleep(self.pause)
        return self.fc(x)


def train(
    profiler_out: Path,
    steps: int,
    *,
    num_workers: int = 0,
    item_cost: float = 0.0,
    step_pause: float = 0.0,
    slow_steps: Sequence[int] = (),
    slow_pause: float = 0.0,
    batch_size: int = 4,
) -> list[float]:
    """Train ``steps`` steps with the FrameworkProfiler writing the step timeline (and the data
    loader's events) under ``profiler_out``; the time each step started.

    Each forward sleeps ``step_pause`` seconds, ``slow_pause`` in ``slow_steps``; each item costs
    ``item_cost`` seconds of CPU in the data loader (its ``num_workers`` processes, or this one).
    Timeline files are rotated every half second, so that a rule following the job sees them.
    """
    plan = ProfilingPlan(
        trace_files=TraceFileSettings(local_path=str(profiler_out), file_close_interval=0.5),
        dataloader=StepWindow(0, steps + 1),
    )
    profiler = FrameworkProfiler(plan, str(profiler_out), NODE, profile_after_close=False)
    torch.manual_seed(0)
    model = Net()
    profiler.register_module(model)
    profiler.set_mode(ModeKeys.TRAIN)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(
        Items(steps * batch_size, item_cost), batch_size=batch_size, num_workers=num_workers
    )
    started = []
    for step, (inputs, labels) in enumerate(loader):
        started.append(time.time())
        model.pause = slow_pause if step in slow_steps else step_pause
        optimizer.zero_grad()
        loss_fn(model(inputs), labels).backward()
        optimizer.step()
    profiler.close()
    return started


# ----- following a job ------------------------------------------------------------------------


class Follow(threading.Thread):
    """The profiler rule runner following a job from a thread, as the job runner runs it."""

    def __init__(self, runner: ProfilerRuleRunner) -> None:
        super().__init__(daemon=True)
        self.runner = runner
        self.verdicts: list[Verdict] = []

    def run(self) -> None:
        self.verdicts = self.runner.run()

    def result(self, timeout: float = 120.0) -> list[Verdict]:
        """The verdicts, once the runner has concluded."""
        self.join(timeout)
        assert not self.is_alive(), "the runner did not conclude"
        return self.verdicts


def definition(rule: str, **parameters: object) -> ProfilerRuleDefinition:
    """A built-in profiler rule with these parameters, checked by the catalogue."""
    return ProfilerRuleDefinition.for_builtin(rule, parameters)


def runner(
    definitions: Sequence[ProfilerRuleDefinition], job: Path, **options: Any
) -> ProfilerRuleRunner:
    """A runner over ``job``'s profiler-output writing ``job``'s rule-output, polling fast."""
    options.setdefault("poll_interval", 0.05)
    options.setdefault("no_data_timeout", 60.0)
    options.setdefault("framework_wait", 3.0)  # the timeline rotates every half second
    return ProfilerRuleRunner(
        definitions,
        str(job / "profiler-output"),
        rule_output_dir=str(job / "rule-output"),
        **options,
    )


def follow(definitions: Sequence[ProfilerRuleDefinition], job: Path, **options: Any) -> Follow:
    """Start following ``job`` with these rules."""
    thread = Follow(runner(definitions, job, **options))
    thread.start()
    return thread


def evaluate(
    definitions: Sequence[ProfilerRuleDefinition], job: Path, **options: Any
) -> list[Verdict]:
    """Evaluate the rules on ``job`` (ended already) and return the verdicts."""
    return runner(definitions, job, **options).run()


def report_of(job: Path, rule: str, configuration: str | None = None) -> dict[str, Any]:
    """The report data a rule wrote (under ``configuration``'s output, default its own)."""
    directory = job / "rule-output" / (configuration or rule)
    return json.loads(Path(rule_report_file(str(directory), rule)).read_text())


def status_of(job: Path, configuration: str) -> str | None:
    """The status a rule configuration wrote last (None before its first)."""
    status = read_status(str(job / "rule-output" / configuration))
    return None if status is None else status.rule_evaluation_status


# ----- the trial ------------------------------------------------------------------------------


def test_windows_hold_the_readings_and_events_that_start_in_them_once_each(
    tmp_path: Path,
) -> None:
    out = tmp_path / "profiler-output"
    end = write_system(out, [host(cpu=float(i)) for i in range(30)], interval=0.1)
    writer = TraceFileWriter(str(out), "0-algo-1", start_time_us=T0 * 1e6)
    # A step that starts in the first second and ends in the second belongs to the first.
    for step in range(3):
        begin = (T0 + 0.5 + step) * 1e6
        writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", begin, 0.7e6, {"step_num": step})
    writer.close()
    trial = ProfilerTrial(str(out))
    trial.refresh()
    assert trial.first_us == T0 * 1e6

    windows = [trial.window(i, (T0 + i) * 1e6, (T0 + i + 1) * 1e6) for i in range(3)]

    cpu = [
        [r.value for r in w.system if r.name == "cpu_total" and r.dimension == "CPUUtilization"]
        for w in windows
    ]
    assert cpu == [[float(i) for i in range(10 * k, 10 * k + 10)] for k in range(3)]
    assert [len(w.samples()) for w in windows] == [10, 10, 10]
    assert [[e.args["step_num"] for e in w.framework] for w in windows] == [[0], [1], [2]]
    assert end == pytest.approx(T0 + 3.0)


def test_data_is_complete_up_to_the_slowest_host_and_the_framework_files(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    write_system(out, [host()] * 50, node="algo-1")  # up to T0 + 4.9
    write_system(out, [host()] * 20, node="algo-2")  # up to T0 + 1.9
    trial = ProfilerTrial(str(out), framework_wait_s=1.0)
    trial.refresh()
    # Before any timeline file, the windows wait framework_wait_s for the first steps' events.
    assert trial.ready_until_us() == pytest.approx((T0 + 0.9) * 1e6)
    without = ProfilerTrial(str(out), framework_wait_s=1.0, framework_profiling=False)
    without.refresh()
    assert without.ready_until_us() == pytest.approx((T0 + 1.9) * 1e6)

    write_system(out, [host()] * 50, node="algo-2", start=T0 + 2.0)
    writer = TraceFileWriter(str(out), "0-algo-1", start_time_us=T0 * 1e6)
    writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", (T0 + 1) * 1e6, 0.5e6)
    writer.close()
    trial.refresh()
    # The timeline reaches T0 + 1.5 only; the system readings, T0 + 4.9 (and 6.9): the framework
    # data holds the windows back, for framework_wait_s at most.
    assert trial.ready_until_us() == pytest.approx((T0 + 3.9) * 1e6)
    assert trial.data_end_us() == pytest.approx((T0 + 6.9) * 1e6)


def test_the_end_is_the_marker_in_the_output_or_where_smdebug_looks(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    write_system(out, [host()] * 3)
    assert not ProfilerTrial(str(out)).ended()
    for place in ("system", "framework", "."):
        (out / place).mkdir(exist_ok=True)
        marker = out / place / "training_job_end.ts"
        marker.write_bytes(b"")
        assert ProfilerTrial(str(out)).ended()
        marker.unlink()
    assert ProfilerTrial(str(out), job_ended=lambda: True).ended()


def test_the_stand_in_nvml_makes_the_real_monitor_report_gpus(tmp_path: Path) -> None:
    out = tmp_path / "profiler-output"
    with monitored(out, fake_gpus(tmp_path / "nvml", utilization=3, memory=40, count=2)):
        pass
    readings = SystemMetricsReader(str(out)).events(0, 1e12)
    gpu = {(r.name, r.dimension): r.value for r in readings if r.type == "gpu"}
    assert gpu[("gpu0", "GPUUtilization")] == 3
    assert gpu[("gpu1", "GPUMemoryUtilization")] == 40
    assert any(r.dimension == "CPUUtilization" and r.name == "cpu0" for r in readings)
