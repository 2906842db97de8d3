"""The SageMaker Python SDK's ``sagemaker.debugger`` module, for trainprobe.

Code written for SageMaker Debugger ports by changing its import::

    from trainprobe.debugger import Rule, ProfilerRule, rule_configs, CollectionConfig

The classes, their signatures, defaults and request dictionaries are the SDK's; trainprobe also
checks values as they are given (``ConfigError``, a ValueError, naming the field and what is
allowed) instead of failing later, inside the job.
"""

from trainprobe import settings
from trainprobe.config import rule_configs
from trainprobe.config.framework_profile import FrameworkProfile
from trainprobe.config.hook_config import (
    CollectionConfig,
    DebuggerHookConfig,
    TensorBoardOutputConfig,
)
from trainprobe.config.metrics_config import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    HorovodProfilingConfig,
    PythonProfiler,
    PythonProfilingConfig,
    SMDataParallelProfilingConfig,
    cProfileTimer,
)
from trainprobe.config.profiler_config import Profiler, ProfilerConfig
from trainprobe.config.rules import (
    ProfilerRule,
    Rule,
    RuleBase,
    get_default_profiler_rule,
    get_rule_container_image_uri,
)
from trainprobe.debugger import metrics_config, utils

DEBUGGER_FLAG = settings.USE_SMDEBUG.name
"""The environment variable that turns the hook off when set to "0" or "false", as on SageMaker."""

framework_name = "debugger"

__all__ = [
    "DEBUGGER_FLAG",
    "CollectionConfig",
    "DataloaderProfilingConfig",
    "DebuggerHookConfig",
    "DetailedProfilingConfig",
    "FrameworkProfile",
    "HorovodProfilingConfig",
    "Profiler",
    "ProfilerConfig",
    "ProfilerRule",
    "PythonProfiler",
    "PythonProfilingConfig",
    "Rule",
    "RuleBase",
    "SMDataParallelProfilingConfig",
    "TensorBoardOutputConfig",
    "cProfileTimer",
    "framework_name",
    "get_default_profiler_rule",
    "get_rule_container_image_uri",
    "metrics_config",
    "rule_configs",
    "utils",
]
