"""A training job's profiler output, synthesized in the real formats, for the report's tests and
benchmark (benchmarks/report.py).

The files are written by trainprobe's own writers (the system monitor's minute files, the
framework profiler's timeline files, the job's end marker), so the report reads them exactly as
it reads a real job's. The job is shaped to give the report something to show: the GPUs are idle
during initialisation and during a data stall in the middle of training, one step in
``outlier_every`` takes ``outlier_factor`` times as long as the others, and GPU memory creeps up.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from trainprobe.storage import system_metrics as sm
from trainprobe.storage.system_metrics import MetricKey, SystemMetricsWriter
from trainprobe.storage.trace_file import TraceFileWriter
from trainprobe.storage.training_end import write_training_end

START_S = 1_795_300_000.0
"""When the synthesized jobs start (a Unix time in seconds, in 2026)."""

PHASES = (("Forward", "Net", 0.30), ("Backward(post-forward)", "Net", 0.45))


@dataclass(frozen=True)
class SyntheticJob:
    """What was written: where, and the figures the report should find."""

    job_dir: Path
    profiler_output: Path
    start_s: float
    end_s: float
    first_step_s: float
    steps: int
    outlier_steps: tuple[int, ...]
    samples: int


def write_synthetic_job(
    job_dir: Path,
    *,
    seconds: float = 120.0,
    interval_ms: int = 500,
    gpus: int = 2,
    cores: int = 4,
    steps: int = 200,
    initialization_s: float | None = None,
    outlier_every: int = 50,
    outlier_factor: float = 6.0,
    seed: int = 0,
) -> SyntheticJob:
    """Write ``seconds`` of one host's system metrics and ``steps`` evenly spread training
    steps under ``job_dir/profiler-output``, and mark the job as ended."""
    rng = random.Random(seed)
    profiler_output = job_dir / "profiler-output"
    initialization_s = seconds * 0.05 if initialization_s is None else initialization_s
    first_step_s = START_S + initialization_s
    training_s = seconds - initialization_s - seconds * 0.02
    outlier_steps = tuple(range(outlier_every - 1, steps, outlier_every)) if outlier_every else ()
    _write_steps(profiler_output, steps, first_step_s, training_s, outlier_steps, outlier_factor)
    samples = _write_system(
        profiler_output, rng, seconds, interval_ms / 1000, gpus, cores, first_step_s, training_s
    )
    write_training_end(str(profiler_output))
    return SyntheticJob(
        job_dir=job_dir,
        profiler_output=profiler_output,
        start_s=START_S,
        end_s=START_S + seconds,
        first_step_s=first_step_s,
        steps=steps,
        outlier_steps=outlier_steps,
        samples=samples,
    )


def _write_steps(
    out: Path,
    steps: int,
    first_step_s: float,
    training_s: float,
    outlier_steps: tuple[int, ...],
    outlier_factor: float,
) -> None:
    weight = [outlier_factor if step in set(outlier_steps) else 1.0 for step in range(steps)]
    unit_us = training_s * 1e6 / sum(weight)
    writer = TraceFileWriter(
        str(out), f"0-{_HOST}", start_time_us=first_step_s * 1e6, close_interval=math.inf
    )
    at_us = first_step_s * 1e6
    for step in range(steps):
        duration_us = unit_us * weight[step]
        args = {"step_num": str(step), "global_step": step, "mode": "TRAIN", "pid": 1000}
        wait_us = duration_us * 0.1
        writer.add("DataLoading", "_SingleProcessDataLoaderIter::GetNext", at_us, wait_us, args)
        start_us = at_us + wait_us
        writer.add(
            "Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", start_us, duration_us - wait_us, args
        )
        phase_us = start_us
        for phase, name, share in PHASES:
            writer.add(phase, name, phase_us, duration_us * share, args)
            phase_us += duration_us * share
        writer.add("Optimizer", "SGD.step", phase_us, duration_us * 0.1, args)
        at_us += duration_us
    writer.close()


_HOST = "synthetic"


def _write_system(
    out: Path,
    rng: random.Random,
    seconds: float,
    interval_s: float,
    gpus: int,
    cores: int,
    first_step_s: float,
    training_s: float,
) -> int:
    writer = SystemMetricsWriter(str(out), "algo-1", publish_seconds=math.inf)
    core_keys = [
        (
            MetricKey(sm.CPU, f"cpu{core}", sm.CPU_UTILIZATION),
            MetricKey(sm.CPU, f"cpu{core}", sm.IO_WAIT_PERCENTAGE),
        )
        for core in range(cores)
    ]
    total_keys = (
        MetricKey(sm.CPU, sm.CPU_TOTAL, sm.CPU_UTILIZATION),
        MetricKey(sm.CPU, sm.CPU_TOTAL, sm.IO_WAIT_PERCENTAGE),
    )
    gpu_keys = [
        (
            MetricKey(sm.GPU, f"gpu{index}", sm.GPU_UTILIZATION),
            MetricKey(sm.GPU, f"gpu{index}", sm.GPU_MEMORY_UTILIZATION),
            MetricKey(sm.ACCELERATOR, f"gpu{index}", sm.GPU_POWER_WATTS),
        )
        for index in range(gpus)
    ]
    memory = MetricKey(sm.MEMORY, sm.MEMORY_USED_PERCENT, "")
    disk_read = MetricKey(sm.IO, sm.READ_BYTES_PER_SECOND, "")
    network = MetricKey(sm.NETWORK, sm.RECEIVE_BYTES_PER_SECOND, sm.ALGORITHM)
    stall = (first_step_s + training_s * 0.5, first_step_s + training_s * 0.55)
    count = int(seconds / interval_s)
    for sample in range(count):
        at = round(START_S + sample * interval_s, 3)
        training = first_step_s <= at < first_step_s + training_s
        stalled = stall[0] <= at < stall[1]
        busy = 85.0 if training and not stalled else 3.0
        readings: list[tuple[MetricKey, float]] = []
        core_total = io_total = 0.0
        for utilization_key, wait_key in core_keys:
            utilization = min(100.0, max(0.0, rng.gauss(95.0 if stalled else 40.0, 8.0)))
            io_wait = max(0.0, rng.gauss(2.0, 1.0))
            readings += [(utilization_key, round(utilization, 2)), (wait_key, round(io_wait, 2))]
            core_total += utilization
            io_total += io_wait
        readings += [
            (total_keys[0], round(core_total / cores, 2)),
            (total_keys[1], round(io_total / cores, 2)),
        ]
        progress = (at - START_S) / seconds
        for utilization_key, memory_key, power_key in gpu_keys:
            utilization = min(100.0, max(0.0, rng.gauss(busy, 5.0)))
            readings += [
                (utilization_key, round(utilization, 2)),
                (memory_key, round(20.0 + 30.0 * progress, 2)),
                (power_key, round(60.0 + 2.5 * utilization, 1)),
            ]
        readings += [
            (memory, round(30.0 + 5.0 * progress, 2)),
            (disk_read, round(abs(rng.gauss(5e7, 1e7)), 1)),
            (network, round(abs(rng.gauss(1e6, 2e5)), 1)),
        ]
        writer.write(at, readings)
    writer.close()
    return count
