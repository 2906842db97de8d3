"""The 11 built-in profiler rules by catalogue name, in the catalogue's order.

``PROFILER_RULE_CLASSES["CPUBottleneck"](threshold=20)`` builds one; ProfilerReport
(``trainprobe.rules.profiler_rules.report``) builds them all.
"""

from __future__ import annotations

from trainprobe.config import catalogue
from trainprobe.rules.profiler_rules.batch_size import BatchSize
from trainprobe.rules.profiler_rules.bottlenecks import CPUBottleneck, IOBottleneck
from trainprobe.rules.profiler_rules.dataloader import Dataloader
from trainprobe.rules.profiler_rules.gpu_memory import GPUMemoryIncrease
from trainprobe.rules.profiler_rules.gpu_utilization import LoadBalancing, LowGPUUtilization
from trainprobe.rules.profiler_rules.max_initialization_time import MaxInitializationTime
from trainprobe.rules.profiler_rules.overview import OverallFrameworkMetrics, OverallSystemUsage
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.step_outlier import StepOutlier

__all__ = ["PROFILER_RULE_CLASSES"]

_CLASSES: tuple[type[WindowRule], ...] = (
    BatchSize,
    CPUBottleneck,
    Dataloader,
    GPUMemoryIncrease,
    IOBottleneck,
    LoadBalancing,
    LowGPUUtilization,
    MaxInitializationTime,
    OverallFrameworkMetrics,
    OverallSystemUsage,
    StepOutlier,
)
_BY_NAME = {rule.rule_name: rule for rule in _CLASSES}

PROFILER_RULE_CLASSES: dict[str, type[WindowRule]] = {
    spec.name: _BY_NAME[spec.name] for spec in catalogue.profiler_rules() if spec.name in _BY_NAME
}
