"""How a job's runner stops, limits and watches its processes, read when a runner starts.

The variables are declared in ``trainprobe.settings`` (``TRAINPROBE_STOP_GRACE_SECONDS``,
``TRAINPROBE_REPORT_EVERY_SECONDS`` and the ``TRAINPROBE_RULE_*`` limits).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainprobe import settings
from trainprobe.jobs.child_process import ChildLimits

__all__ = ["ProcessSettings", "process_settings"]


@dataclass(frozen=True)
class ProcessSettings:
    """How a job's runner stops, limits and watches its processes (see the module docstring)."""

    stop_grace_seconds: float = 10.0
    report_every_seconds: float = 600.0
    rule_niceness: int = 10
    rule_memory_limit_mb: int = 2048
    rule_cpus: int = 0
    rule_progress_timeout_seconds: float = 120.0

    def rule_limits(self) -> ChildLimits:
        """The limits each rule process runs under."""
        cpus = None
        available = _available_cpus()
        if 0 < self.rule_cpus < len(available):
            cpus = frozenset(available[-self.rule_cpus :])
        return ChildLimits(
            niceness=self.rule_niceness,
            memory_limit_mb=self.rule_memory_limit_mb or None,
            cpus=cpus,
        )

    def rule_environment(self) -> dict[str, str]:
        """Variables for each rule process: thread pools no larger than its share of cores."""
        threads = str(self.rule_cpus or len(_available_cpus()))
        names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
        return dict.fromkeys(names, threads)


def _available_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def process_settings(environ: Mapping[str, str] | None = None) -> ProcessSettings:
    """The settings ``environ`` (default: this process's environment) gives."""
    cpus = settings.RULE_CPUS.get(environ)
    return ProcessSettings(
        stop_grace_seconds=settings.STOP_GRACE_SECONDS.get(environ),
        report_every_seconds=settings.REPORT_EVERY_SECONDS.get(environ),
        rule_niceness=settings.RULE_NICENESS.get(environ),
        rule_memory_limit_mb=settings.RULE_MEMORY_LIMIT_MB.get(environ),
        rule_cpus=max(1, len(_available_cpus()) // 4) if cpus is None else cpus,
        rule_progress_timeout_seconds=settings.RULE_PROGRESS_TIMEOUT_SECONDS.get(environ),
    )
