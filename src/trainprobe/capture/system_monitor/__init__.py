"""The per-host system monitor: its own process, sampling the machine into smdebug's files.

Run it as ``python -m trainprobe.capture.system_monitor --out DIR [--interval-ms 500] [--pid PID]
[--node-id algo-1] [--config PROFILER_CONFIG_JSON]``, or in-process with ``SystemMonitor(...).run``.
What it writes and how files appear: ``trainprobe.storage.system_metrics``.
"""

from __future__ import annotations

from trainprobe.capture.system_monitor.monitor import Outcome, SystemMonitor
from trainprobe.capture.system_monitor.settings import MonitorSettings, watch_profiler_config

__all__ = ["MonitorSettings", "Outcome", "SystemMonitor", "watch_profiler_config"]
