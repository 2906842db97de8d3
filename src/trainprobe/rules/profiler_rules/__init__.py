"""The profiler rules: why is the training slow, and what to change.

They read a job's profiler output (system metrics and the framework timeline,
``trainprobe.storage.system_metrics`` and ``trainprobe.storage.trace_file``) window by window while
the job runs (``ProfilerTrial``), keep their report data (times triggered, violations, datapoints,
parameters, details and a recommendation in plain words) and end with the rule engine's statuses::

    from trainprobe.rules.profiler_rules import ProfilerRuleDefinition, run_profiler_rules

    report = ProfilerRuleDefinition.for_builtin("ProfilerReport", {"CPUBottleneck_threshold": "20"})
    [verdict] = run_profiler_rules([report], "<job>/profiler-output", "<job>/rule-output")

or, as a process, ``python -m trainprobe.rules.profiler_rules <job>/profiler-output --rule-output
<job>/rule-output``. The rules: BatchSize, CPUBottleneck, Dataloader, GPUMemoryIncrease,
IOBottleneck, LoadBalancing, LowGPUUtilization, MaxInitializationTime, OverallFrameworkMetrics,
OverallSystemUsage, StepOutlier, and ProfilerReport, which runs them all. ``WindowRule`` is their
base class.
"""

from __future__ import annotations

from trainprobe.rules.profiler_rules.batch_size import BatchSize
from trainprobe.rules.profiler_rules.bottlenecks import CPUBottleneck, IOBottleneck
from trainprobe.rules.profiler_rules.builtin import PROFILER_RULE_CLASSES
from trainprobe.rules.profiler_rules.dataloader import Dataloader
from trainprobe.rules.profiler_rules.definition import ProfilerRuleDefinition, profiler_rule_class
from trainprobe.rules.profiler_rules.evaluator import ProfilerRuleEvaluator
from trainprobe.rules.profiler_rules.gpu_memory import GPUMemoryIncrease
from trainprobe.rules.profiler_rules.gpu_utilization import LoadBalancing, LowGPUUtilization
from trainprobe.rules.profiler_rules.max_initialization_time import MaxInitializationTime
from trainprobe.rules.profiler_rules.overview import OverallFrameworkMetrics, OverallSystemUsage
from trainprobe.rules.profiler_rules.report import ProfilerReport
from trainprobe.rules.profiler_rules.report_data import RuleReport
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.runner import ProfilerRuleRunner, run_profiler_rules
from trainprobe.rules.profiler_rules.step_outlier import StepOutlier
from trainprobe.rules.profiler_rules.trial import ProfilerTrial
from trainprobe.rules.profiler_rules.window import Sample, Window

__all__ = [
    "PROFILER_RULE_CLASSES",
    "BatchSize",
    "CPUBottleneck",
    "Dataloader",
    "GPUMemoryIncrease",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "OverallFrameworkMetrics",
    "OverallSystemUsage",
    "ProfilerReport",
    "ProfilerRuleDefinition",
    "ProfilerRuleEvaluator",
    "ProfilerRuleRunner",
    "ProfilerTrial",
    "RuleReport",
    "Sample",
    "StepOutlier",
    "Window",
    "WindowRule",
    "profiler_rule_class",
    "run_profiler_rules",
]
