"""``python -m trainprobe.capture.system_monitor``: run the monitor until told to stop.

It stops on SIGTERM or SIGINT, or when the process given by ``--pid`` exits, and finishes the
current minute's file before exiting (status 0). Bad arguments exit with status 2 and a message
naming the argument, the value and what is allowed, before anything is written.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from trainprobe.capture.system_monitor.monitor import Outcome, SystemMonitor
from trainprobe.capture.system_monitor.settings import (
    MonitorSettings,
    check_interval,
    watch_profiler_config,
)
from trainprobe.config.errors import ConfigError
from trainprobe.config.profiler_config import SYSTEM_MONITOR_INTERVAL_DEFAULT
from trainprobe.storage import files
from trainprobe.storage.system_metrics import check_node_id

__all__ = ["main"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
STOP_DEADLINE_SECONDS = 30.0
STOP_POLL_SECONDS = 0.1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainprobe.capture.system_monitor",
        description="Sample this host into smdebug's system-metrics files until stopped.",
    )
    parser.add_argument(
        "--out", required=True, help="the profiler output directory (or s3://bucket/prefix)"
    )
    parser.add_argument(
        "--interval-ms",
        type=int,
        default=SYSTEM_MONITOR_INTERVAL_DEFAULT,
        help="sampling interval: 100, 200, 500, 1000, 5000 or 60000 (default 500); an interval "
        "in the --config file wins",
    )
    parser.add_argument(
        "--pid", type=int, help="the training process: watched, and stop when it exits"
    )
    parser.add_argument("--node-id", default="algo-1", help="this host's name, algo-<n>")
    parser.add_argument(
        "--config", help="a ProfilerConfig request JSON file, watched for a new interval or off"
    )
    return parser


def _monitor(arguments: argparse.Namespace) -> SystemMonitor:
    """The monitor the arguments describe; raises ConfigError or ConfigErrors for bad ones."""
    interval = check_interval(arguments.interval_ms, "--interval-ms")
    node_id = check_node_id(arguments.node_id, "--node-id")
    if arguments.pid is not None and arguments.pid <= 0:
        raise ConfigError("--pid", arguments.pid, "a process id, a whole number from 1")
    settings = MonitorSettings(interval_ms=interval)
    config = None
    if arguments.config is not None:
        config = watch_profiler_config(arguments.config, interval)
        try:
            settings = config.read()
        except OSError as error:
            raise ConfigError("--config", arguments.config, f"a readable file ({error})") from None
    try:
        files.prepare_directory(arguments.out)
    except OSError as error:
        raise ConfigError(
            "--out", arguments.out, f"a directory this user can write ({error})"
        ) from None
    return SystemMonitor(
        arguments.out, node_id=node_id, settings=settings, pid=arguments.pid, config=config
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the monitor with command-line ``argv``; returns the exit status."""
    arguments = _parser().parse_args(argv)
    logging.basicConfig(format="trainprobe system monitor: %(message)s", level=logging.INFO)
    try:
        monitor = _monitor(arguments)
    except ConfigError as error:
        print(f"trainprobe system monitor: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()
    asked: list[int] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        # Only a note, taken without a lock: a handler that set the Event itself could be
        # interrupted by a second signal while holding the Event's lock, and the second
        # handler would then wait for that lock forever (a parent's death and a job's stop
        # send SIGTERM together). The main thread acts on the note.
        asked.append(signum)

    previous = {number: signal.signal(number, request_stop) for number in STOP_SIGNALS}
    outcome: list[Outcome] = []
    # The loop runs in a thread; the main thread wakes often enough to act on a stop at once.
    worker = threading.Thread(
        target=lambda: outcome.append(monitor.run(stop)), name="system-monitor"
    )
    try:
        worker.start()
        while worker.is_alive():
            worker.join(timeout=STOP_POLL_SECONDS)
            if asked and not stop.is_set():
                stop.set()
                # Finishing the current files takes a moment; a write that hangs must not
                # keep the monitor alive once its job has ended.
                deadline = threading.Timer(STOP_DEADLINE_SECONDS, os._exit, (1,))
                deadline.daemon = True
                deadline.start()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 0 if outcome else 1


if __name__ == "__main__":
    sys.exit(main())
