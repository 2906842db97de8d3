"""The system monitor as a real process, watching a real busy process, read back from its files.

What rows must exist and how smdebug's rules read them comes from reference/smdebug.md §5.1 and
§5.3; the GPU path runs in-process with pynvml's functions replaced by a fake with two GPUs. The
busy run's monitor imports a stand-in pynvml whose driver is missing, so that it runs as on a
host without a GPU on any machine.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from timing import wait_until
from trainprobe.capture.system_monitor import MonitorSettings, SystemMonitor, watch_profiler_config
from trainprobe.capture.system_monitor.__main__ import main
from trainprobe.storage.system_metrics import SystemMetric, SystemMetricsReader

# They judge how busy the machine's cores were: by themselves (scripts/test).
pytestmark = pytest.mark.alone

KEYS = ["Type", "Name", "Dimension", "Value", "NodeId", "Timestamp"]


def start_busy_process() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def start_waiting_parent_of_a_busy_child() -> tuple[subprocess.Popen[str], int]:
    """A process that only waits for its child, which keeps a core busy; and the child's pid."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT_OF_BUSY_CHILD], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    return parent, int(parent.stdout.readline())


PARENT_OF_BUSY_CHILD = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
print(child.pid, flush=True)
child.wait()
"""


NO_DRIVER_NVML = """
class NVMLError(Exception):
    pass


def nvmlInit():
    raise NVMLError("Driver Not Loaded")
"""


def without_nvml(directory: Path) -> dict[str, str]:
    """An environment whose ``pynvml`` finds no driver, as on a host without a GPU."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pynvml.py").write_text(NO_DRIVER_NVML)
    path = os.pathsep.join([str(directory), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


def start_monitor(
    out: Path, *arguments: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "trainprobe.capture.system_monitor", "--out", str(out), *arguments],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def samples(events: list[SystemMetric]) -> dict[float, list[SystemMetric]]:
    """The readings of each sample (they share a timestamp)."""
    by_time: dict[float, list[SystemMetric]] = defaultdict(list)
    for event in events:
        by_time[event.timestamp].append(event)
    return dict(by_time)


def all_events(out: Path) -> list[SystemMetric]:
    return SystemMetricsReader(str(out)).events(0, 10**10)


def files_on_disk(out: Path) -> list[Path]:
    return sorted(path for path in out.rglob("*") if path.is_file())


def check_whole_lines(out: Path, problems: list[str]) -> None:
    """Every minute's file visible now holds whole readings only (the atomic-appearance promise).

    Temporary files (``*.tmp``, being written before a rename) are nobody's to read.
    """
    for path in files_on_disk(out):
        if path.suffix not in (".json", ".partial"):
            continue
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            continue  # a partial minute renamed since it was listed
        if not content.endswith(b"\n"):
            problems.append(f"{path.name} ends mid-line")
        for line in content.splitlines():
            try:
                if list(json.loads(line)) != KEYS:
                    problems.append(f"{path.name}: {line!r}")
            except ValueError:
                problems.append(f"{path.name}: broken line {line!r}")


@pytest.fixture(scope="module")
def busy_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One monitor run at 100 ms over an idle process with a busy child, stopped by SIGTERM, on
    a host without a GPU (NVML finds no driver)."""
    out = tmp_path_factory.mktemp("busy") / "profiler-output"
    env = without_nvml(tmp_path_factory.mktemp("nvml"))
    training, busy_child = start_waiting_parent_of_a_busy_child()
    monitor = start_monitor(out, "--interval-ms", "100", "--pid", str(training.pid), env=env)
    try:
        problems: list[str] = []
        reader = SystemMetricsReader(str(out))
        counts: list[int] = []

        def enough_samples() -> bool:
            check_whole_lines(out, problems)
            counts.append(len(samples(reader.events(0, 10**10))))
            return counts[-1] >= 15

        wait_until(enough_samples, "15 samples")
        # Stop one second after a publication: the readings since then are only in memory.
        wait_until(lambda: enough_samples() and counts[-1] > counts[-2], "a publication")
        time.sleep(1.0)
        before_stop = len(samples(reader.events(0, 10**10)))
        monitor.send_signal(signal.SIGTERM)
        _, stderr = monitor.communicate(timeout=60)
        yield {
            "out": out,
            "problems": problems,
            "counts": counts,
            "before_stop": before_stop,
            "returncode": monitor.returncode,
            "stderr": stderr,
            "events": all_events(out),
        }
    finally:
        monitor.kill()
        os.kill(busy_child, signal.SIGKILL)
        training.wait()


def test_a_reader_following_the_monitor_sees_whole_readings_and_more_of_them(
    busy_run: dict[str, Any],
) -> None:
    assert busy_run["problems"] == []
    assert busy_run["counts"] == sorted(busy_run["counts"])
    assert busy_run["counts"][-1] >= 15  # read while the minute was still being written


def test_sigterm_finishes_the_files_with_every_sample_taken(busy_run: dict[str, Any]) -> None:
    assert busy_run["returncode"] == 0
    assert len(samples(busy_run["events"])) > busy_run["before_stop"]
    names = [path.name for path in files_on_disk(busy_run["out"])]
    assert names and all(name.endswith(".algo-1.json") for name in names)


def test_without_nvml_gpu_metrics_are_absent_after_at_most_one_line(
    busy_run: dict[str, Any],
) -> None:
    assert len(busy_run["stderr"].splitlines()) <= 1, busy_run["stderr"]
    assert not [event for event in busy_run["events"] if event.type in ("gpu", "accelerator")]


def test_every_sample_has_each_core_and_the_total_as_smdebug_rules_read_them(
    busy_run: dict[str, Any],
) -> None:
    cores = {f"cpu{index}" for index in range(os.cpu_count() or 0)}
    for readings in samples(busy_run["events"]).values():
        for dimension in ("CPUUtilization", "I/OWaitPercentage"):
            values = {e.name: e.value for e in readings if e.dimension == dimension}
            assert set(values) == cores | {"cpu_total"}
            assert all(0 <= value <= 100 for value in values.values())
            # The total is the mean of the cores, so averaging every name changes nothing.
            core_mean = sum(values[name] for name in cores) / len(cores)
            assert values["cpu_total"] == pytest.approx(core_mean, abs=0.01)
            assert {e.type for e in readings if e.dimension == dimension} == {"cpu"}


def test_memory_disk_and_network_come_under_sagemakers_names_every_half_second(
    busy_run: dict[str, Any],
) -> None:
    expected = {
        ("memory", "MemoryUsedPercent", ""),
        ("host", "MemoryUsedBytes", ""),
        ("i/o", "ReadThroughputInBytesPerSecond", ""),
        ("i/o", "WriteThroughputInBytesPerSecond", ""),
        ("i/o", "IOPS", ""),
        ("network", "ReceiveBytesPerSecond", "Algorithm"),
        ("network", "TransmitBytesPerSecond", "Algorithm"),
        ("process", "training", "ProcessCPUPercent"),
        ("process", "training", "ProcessMemoryUsedBytes"),
        ("process", "training", "ProcessCount"),
    }
    with_resources = []
    for timestamp, readings in sorted(samples(busy_run["events"]).items()):
        found = {(e.type, e.name, e.dimension): e.value for e in readings}
        if expected & set(found):
            assert expected <= set(found)  # they come together
            assert 0 < found["memory", "MemoryUsedPercent", ""] < 100
            assert found["host", "MemoryUsedBytes", ""] > 0
            assert min(found[key] for key in expected) >= 0
            with_resources.append(timestamp)
    # At 100 ms they are read every fifth sample (at most every 0.5 s), the CPU every sample.
    assert len(with_resources) >= 3
    assert min(b - a for a, b in itertools.pairwise(with_resources)) > 0.45


def test_the_training_process_rows_include_its_busy_child(busy_run: dict[str, Any]) -> None:
    rows = [e for e in busy_run["events"] if (e.type, e.name) == ("process", "training")]
    by_dimension: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_dimension[row.dimension].append(row.value)
    assert set(by_dimension["ProcessCount"]) == {2.0}
    assert min(by_dimension["ProcessMemoryUsedBytes"]) > 0
    # The parent only waits; its child's busy loop keeps a core busy, even on a shared machine.
    assert max(by_dimension["ProcessCPUPercent"]) > 30


def test_the_monitor_ends_when_the_watched_process_exits(tmp_path: Path) -> None:
    busy = start_busy_process()
    monitor = start_monitor(tmp_path, "--interval-ms", "100", "--pid", str(busy.pid))
    try:
        wait_until(lambda: bool(files_on_disk(tmp_path)), "the first file")
        busy.kill()  # not reaped yet: the monitor must see through the zombie
        monitor.wait(timeout=60)
        assert monitor.returncode == 0
        assert files_on_disk(tmp_path)
        assert all(path.suffix == ".json" for path in files_on_disk(tmp_path))
    finally:
        monitor.kill()
        busy.kill()
        busy.wait()


def test_a_burst_of_stop_signals_still_ends_the_monitor_with_its_files(tmp_path: Path) -> None:
    # A job's monitor can be sent SIGTERM by its parent's death and by the job's stop at once:
    # a second signal arriving while the first is being handled must not leave it hanging.
    busy = start_busy_process()
    monitor = start_monitor(tmp_path, "--interval-ms", "100", "--pid", str(busy.pid))
    try:
        wait_until(lambda: bool(files_on_disk(tmp_path)), "the first file")
        deadline = time.monotonic() + 30
        while monitor.poll() is None and time.monotonic() < deadline:
            monitor.send_signal(signal.SIGTERM)
            time.sleep(0.0001)
        # Ended (a signal after its files were finished may end it by SIGTERM's default).
        assert monitor.poll() in (0, -signal.SIGTERM)
        assert files_on_disk(tmp_path)
        assert all(path.suffix == ".json" for path in files_on_disk(tmp_path))
    finally:
        monitor.kill()
        busy.kill()
        busy.wait()


def write_config(path: Path, request: dict[str, object]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(request))
    os.replace(temporary, path)


def test_the_config_file_changes_the_interval_and_turns_monitoring_off_and_on(
    tmp_path: Path,
) -> None:
    config = tmp_path / "profiler_config.json"
    write_config(config, {"ProfilingIntervalInMilliseconds": 1000})
    out = tmp_path / "out"
    monitor = start_monitor(out, "--config", str(config))
    reader = SystemMetricsReader(str(out))

    def times(after: float = 0.0) -> list[float]:
        return sorted(t for t in samples(reader.events(0, 10**10)) if t > after)

    def gaps(stamps: list[float]) -> list[float]:
        return [b - a for a, b in itertools.pairwise(stamps)]

    try:
        wait_until(lambda: len(times()) >= 3, "3 samples at 1000 ms")
        assert statistics.median(gaps(times())) > 0.8

        write_config(config, {"ProfilingIntervalInMilliseconds": 100})
        changed = time.time()
        wait_until(lambda: len(times(changed + 0.6)) >= 10, "10 samples at 100 ms")
        assert statistics.median(gaps(times(changed + 0.6))) < 0.5

        write_config(config, {"DisableProfiler": True})
        # Turned off, the monitor finishes its minute: no partial file is left.
        wait_until(lambda: not list(out.rglob("*.partial")), "the minute to be finished")
        off = len(times())
        time.sleep(1.5)
        assert len(times()) == off

        write_config(config, {"ProfilingIntervalInMilliseconds": 200})
        wait_until(lambda: len(times()) >= off + 5, "sampling to resume")
    finally:
        monitor.send_signal(signal.SIGTERM)
        _, stderr = monitor.communicate(timeout=60)
    assert monitor.returncode == 0
    assert "every 100 ms" in stderr and "off" in stderr


def test_a_config_file_turned_invalid_keeps_the_settings_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "profiler_config.json"
    write_config(config, {})
    watch = watch_profiler_config(str(config), default_interval_ms=200)
    assert watch.read() == MonitorSettings(enabled=True, interval_ms=200)
    assert watch.changed() is None

    with caplog.at_level(logging.WARNING):
        write_config(config, {"ProfilingIntervalInMilliseconds": 42})
        assert watch.changed() is None
        assert watch.changed() is None
    [warning] = [r.getMessage() for r in caplog.records]
    assert "ignoring" in warning and "ProfilingIntervalInMilliseconds" in warning

    write_config(config, {"ProfilingIntervalInMilliseconds": 1000, "DisableProfiler": True})
    assert watch.changed() == MonitorSettings(enabled=False, interval_ms=1000)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--interval-ms", "250"], ["--interval-ms", "250", "100, 200, 500", "'200'"]),
        (["--node-id", "worker-1"], ["--node-id", "'worker-1'", "algo-<n>", "'algo-1'"]),
        (["--pid", "0"], ["--pid", "0"]),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], named: list[str]
) -> None:
    assert main(["--out", str(tmp_path / "out"), *arguments]) == 2
    message = capsys.readouterr().err
    assert all(part in message for part in named), message
    assert not (tmp_path / "out").exists()


def test_an_output_directory_that_cannot_be_made_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "a-file"
    taken.write_text("")
    assert main(["--out", str(taken)]) == 2
    assert "--out" in capsys.readouterr().err


def test_a_bad_config_file_is_refused_as_the_process_starts(tmp_path: Path) -> None:
    config = tmp_path / "profiler_config.json"
    write_config(config, {"ProfilingIntervalInMilliseconds": 42, "DisableProfilr": True})
    monitor = [sys.executable, "-m", "trainprobe.capture.system_monitor"]
    result = subprocess.run(
        [*monitor, "--out", str(tmp_path / "out"), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    for part in ("ProfilingIntervalInMilliseconds", "42", "DisableProfilr", "'DisableProfiler'"):
        assert part in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_process_that_is_not_running_has_nothing_to_monitor(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert main(["--out", str(tmp_path), "--pid", str(gone.pid)]) == 0
    assert not files_on_disk(tmp_path)


class FakeNvml:
    """Two GPUs behind pynvml's functions; the second cannot report its power."""

    def __init__(self) -> None:
        self.used = [4 * 2**30, 30 * 2**30]
        self.total = 40 * 2**30
        self.shut_down = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in (
            "nvmlInit",
            "nvmlShutdown",
            "nvmlDeviceGetCount",
            "nvmlDeviceGetHandleByIndex",
            "nvmlDeviceGetUtilizationRates",
            "nvmlDeviceGetMemoryInfo",
            "nvmlDeviceGetPowerUsage",
            "nvmlDeviceGetTemperature",
        ):
            monkeypatch.setattr(pynvml, name, getattr(self, name))

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=[85, 7][handle], memory=[40, 2][handle])

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        used = self.used[handle]
        return SimpleNamespace(total=self.total, used=used, free=self.total - used)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        if handle == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 251500  # milliwatts

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return [66, 41][handle]


def run_in_process(out: Path) -> None:
    """Run a monitor at 100 ms in a thread until its first sample shows, then stop it."""
    stop = threading.Event()
    monitor = SystemMonitor(str(out), settings=MonitorSettings(interval_ms=100))
    thread = threading.Thread(target=monitor.run, args=(stop,))
    thread.start()
    try:
        wait_until(lambda: bool(all_events(out)), "the first sample")
    finally:
        stop.set()
        thread.join()


def test_each_gpu_nvml_shows_gets_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    nvml = FakeNvml()
    nvml.install(monkeypatch)
    with caplog.at_level(logging.INFO):
        run_in_process(tmp_path)

    assert nvml.shut_down
    assert not caplog.records  # an unsupported metric is not worth a line
    for readings in samples(all_events(tmp_path)).values():
        found = {(e.type, e.name, e.dimension): e.value for e in readings}
        gpu_rows = {key: value for key, value in found.items() if key[0] in ("gpu", "accelerator")}
        assert gpu_rows == {
            ("gpu", "gpu0", "GPUUtilization"): 85,
            ("gpu", "gpu1", "GPUUtilization"): 7,
            ("gpu", "gpu0", "GPUMemoryUtilization"): 10.0,  # 4 of 40 GiB
            ("gpu", "gpu1", "GPUMemoryUtilization"): 75.0,  # 30 of 40 GiB
            ("accelerator", "gpu0", "GPUMemoryUsedBytes"): 4 * 2**30,
            ("accelerator", "gpu1", "GPUMemoryUsedBytes"): 30 * 2**30,
            ("accelerator", "gpu0", "GPUMemoryBandwidthUtilization"): 40,
            ("accelerator", "gpu1", "GPUMemoryBandwidthUtilization"): 2,
            ("accelerator", "gpu0", "GPUPowerWatts"): 251.5,
            ("accelerator", "gpu0", "GPUTemperatureCelsius"): 66,
            ("accelerator", "gpu1", "GPUTemperatureCelsius"): 41,
        }


def test_nvml_failing_to_start_turns_gpu_metrics_off_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_driver() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    with caplog.at_level(logging.INFO):
        run_in_process(tmp_path)

    assert len(caplog.records) == 1
    assert "no GPU metrics" in caplog.records[0].getMessage()
    events = all_events(tmp_path)
    assert not [event for event in events if event.type in ("gpu", "accelerator")]
    assert [event for event in events if event.dimension == "CPUUtilization"]
