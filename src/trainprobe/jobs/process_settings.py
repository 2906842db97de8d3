"""The environment settings of a job's processes, read in one place when a runner starts.

=========================================== ======= ===========================================
variable                                    default meaning
=========================================== ======= ===========================================
TRAINPROBE_STOP_GRACE_SECONDS               10      how long a stopped process may take to end
                                                    after SIGTERM before it is killed
TRAINPROBE_REPORT_EVERY_SECONDS             600     how often a running job's profiler report
                                                    is rewritten
TRAINPROBE_RULE_NICENESS                    10      niceness added to each rule process (0-19):
                                                    rules yield the CPU to the training
TRAINPROBE_RULE_MEMORY_LIMIT_MB             2048    memory limit of each rule process (its data
                                                    and anonymous memory); 0: no limit
TRAINPROBE_RULE_CPUS                        a       how many cores the rule processes share (the
                                                    quarter highest-numbered ones); 0: every core
TRAINPROBE_RULE_PROGRESS_TIMEOUT_SECONDS    120     a rule process that makes no progress that
                                                    long is ended, its rules in Error
=========================================== ======= ===========================================

(a: a quarter of the machine's cores, at least one.) A value that is not allowed is a
ConfigError naming the variable, the value and what is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainprobe.config.errors import ConfigError
from trainprobe.jobs.child_process import ChildLimits

__all__ = ["ProcessSettings", "process_settings"]

STOP_GRACE_VARIABLE = "TRAINPROBE_STOP_GRACE_SECONDS"
REPORT_EVERY_VARIABLE = "TRAINPROBE_REPORT_EVERY_SECONDS"
RULE_NICENESS_VARIABLE = "TRAINPROBE_RULE_NICENESS"
RULE_MEMORY_VARIABLE = "TRAINPROBE_RULE_MEMORY_LIMIT_MB"
RULE_CPUS_VARIABLE = "TRAINPROBE_RULE_CPUS"
RULE_PROGRESS_VARIABLE = "TRAINPROBE_RULE_PROGRESS_TIMEOUT_SECONDS"


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


def _number(environ: Mapping[str, str], name: str, default: float, allowed: str) -> float:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(name, text, allowed) from None
    if not value >= 0 or value == float("inf"):
        raise ConfigError(name, text, allowed)
    return value


def _whole(
    environ: Mapping[str, str], name: str, default: int, allowed: str, most: int | None = None
) -> int:
    value = _number(environ, name, default, allowed)
    if value != int(value) or (most is not None and value > most):
        raise ConfigError(name, environ.get(name), allowed)
    return int(value)


def _positive(environ: Mapping[str, str], name: str, default: float, allowed: str) -> float:
    value = _number(environ, name, default, allowed)
    if value <= 0:
        raise ConfigError(name, environ.get(name), allowed)
    return value


def process_settings(environ: Mapping[str, str] | None = None) -> ProcessSettings:
    """The settings ``environ`` (default: this process's environment) gives."""
    environ = os.environ if environ is None else environ
    seconds = "a number of seconds, 0 or more"
    return ProcessSettings(
        stop_grace_seconds=_number(environ, STOP_GRACE_VARIABLE, 10.0, seconds),
        report_every_seconds=_number(environ, REPORT_EVERY_VARIABLE, 600.0, seconds),
        rule_niceness=_whole(
            environ, RULE_NICENESS_VARIABLE, 10, "a whole number from 0 to 19", most=19
        ),
        rule_memory_limit_mb=_whole(
            environ, RULE_MEMORY_VARIABLE, 2048, "a whole number of megabytes (0: no limit)"
        ),
        rule_cpus=_whole(
            environ,
            RULE_CPUS_VARIABLE,
            max(1, len(_available_cpus()) // 4),
            "a whole number of cores (0: every core)",
        ),
        rule_progress_timeout_seconds=_positive(
            environ, RULE_PROGRESS_VARIABLE, 120.0, "a number of seconds, more than 0"
        ),
    )
