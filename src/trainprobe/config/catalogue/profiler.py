"""The 11 built-in profiler rules and ProfilerReport, which runs them all.

The spec names these rules but gives no parameter tables, so the defaults are the ones the SageMaker
SDK sends: smdebug-rulesconfig's classes (1.0.1, the release the SDK installs), with their checks
(percentages within 0..100, counts above 0). Where smdebug's rule code or AWS's rule documentation
gives another default, the parameter records it in ``alternatives``. Parameters with
``in_rulesconfig=False`` are accepted by trainprobe but not sent unless given.
"""

from __future__ import annotations

from trainprobe.config.catalogue.model import (
    FRAMEWORKS,
    AlternativeDefault,
    Parameter,
    ParamType,
    RuleSpec,
)

__all__ = ["PROFILER_REPORT", "PROFILER_RULES"]

_RULESCONFIG = "smdebug-rulesconfig 1.0.1"
_CODE = "smdebug's profiler rule code (ccf5a36a)"
_DOCS = "AWS rule documentation"
_SCAN_INTERVAL_US = 60_000_000


def _percent(
    name: str, default: float, meaning: str, *alternatives: AlternativeDefault
) -> Parameter:
    return Parameter(
        name,
        ParamType.FLOAT,
        default,
        meaning,
        minimum=0.0,
        maximum=100.0,
        source=_RULESCONFIG,
        alternatives=alternatives,
    )


def _positive(
    name: str,
    type_: ParamType,
    default: float,
    meaning: str,
    *alternatives: AlternativeDefault,
) -> Parameter:
    return Parameter(
        name,
        type_,
        default,
        meaning,
        minimum=0.0,
        min_exclusive=True,
        source=_RULESCONFIG,
        alternatives=alternatives,
    )


def _patience(default: int, meaning: str, *alternatives: AlternativeDefault) -> Parameter:
    return _positive("patience", ParamType.INTEGER, default, meaning, *alternatives)


def _window(default: int, meaning: str, *alternatives: AlternativeDefault) -> Parameter:
    return _positive("window", ParamType.INTEGER, default, meaning, *alternatives)


def _scan_interval(in_rulesconfig: bool = True) -> Parameter:
    return Parameter(
        "scan_interval_us",
        ParamType.INTEGER,
        _SCAN_INTERVAL_US,
        "Length in microseconds of the window of new data the rule reads at each evaluation.",
        minimum=0.0,
        min_exclusive=True,
        source=_RULESCONFIG if in_rulesconfig else _CODE,
        in_rulesconfig=in_rulesconfig,
    )


def _docs(value: object) -> AlternativeDefault:
    return AlternativeDefault(value, _DOCS)


def _rule(name: str, description: str, *parameters: Parameter) -> RuleSpec:
    return RuleSpec(
        name=name,
        kind="profiler",
        sdk_name=name,
        description=description,
        parameters=parameters,
        frameworks=FRAMEWORKS,
    )


_WAIT = "Datapoints to record before the first evaluation."

PROFILER_RULES: tuple[RuleSpec, ...] = (
    _rule(
        "BatchSize",
        "Fires when CPU, GPU and GPU memory are all lightly used: the batch may be too small.",
        _percent(
            "cpu_threshold_p95", 70, "95th percentile of CPU utilization below which it is low."
        ),
        _percent(
            "gpu_threshold_p95", 70, "95th percentile of GPU utilization below which it is low."
        ),
        _percent(
            "gpu_memory_threshold_p95",
            70,
            "95th percentile of GPU memory utilization below which it is low.",
        ),
        _patience(1000, _WAIT, _docs(100)),
        _window(500, "Number of most recent datapoints the percentiles are computed over."),
        _scan_interval(),
    ),
    _rule(
        "CPUBottleneck",
        "Fires when the GPU waits on a busy CPU for too much of the time.",
        _percent(
            "threshold",
            50,
            "Percentage of the time with a CPU bottleneck above which the rule fires.",
        ),
        _percent("gpu_threshold", 10, "GPU utilization below which the GPU counts as idle."),
        _percent("cpu_threshold", 90, "CPU utilization above which the CPU counts as busy."),
        _patience(1000, _WAIT, _docs(100)),
        _scan_interval(),
    ),
    _rule(
        "Dataloader",
        "Fires when too few or too many data loader processes run for the CPU cores available.",
        _positive(
            "min_threshold",
            ParamType.FLOAT,
            70,
            "Least share of the CPU cores (percent) the data loader processes should use.",
        ),
        _positive(
            "max_threshold",
            ParamType.FLOAT,
            200,
            "Largest share of the CPU cores (percent) the data loader processes should use.",
        ),
        _scan_interval(),
        Parameter(
            "patience",
            ParamType.INTEGER,
            10,
            _WAIT,
            minimum=0.0,
            min_exclusive=True,
            source=_CODE,
            in_rulesconfig=False,
        ),
    ),
    _rule(
        "GPUMemoryIncrease",
        "Fires on a large increase of GPU memory use.",
        _positive(
            "increase",
            ParamType.FLOAT,
            5,
            "Increase of the moving average of memory use (percentage points) that fires the rule.",
            _docs(10),
        ),
        _patience(1000, _WAIT, _docs(100)),
        _window(10, "Number of datapoints in the moving average.", _docs(500)),
        _scan_interval(),
    ),
    _rule(
        "IOBottleneck",
        "Fires when the GPU waits on I/O for too much of the time.",
        _percent(
            "threshold",
            50,
            "Percentage of the time with an I/O bottleneck above which the rule fires.",
        ),
        _percent(
            "gpu_threshold", 10, "GPU utilization below which the GPU counts as idle.", _docs(70)
        ),
        _percent("io_threshold", 50, "I/O wait percentage above which I/O counts as a bottleneck."),
        _patience(1000, _WAIT, _docs(100)),
        _scan_interval(),
    ),
    _rule(
        "LoadBalancing",
        "Fires when the work is unevenly spread over the GPUs.",
        _percent(
            "threshold",
            0.5,
            "Distance between two GPUs' utilization histograms above which the rule fires.",
            AlternativeDefault(0.2, _CODE),
        ),
        _patience(1000, _WAIT, _docs(10)),
        _scan_interval(),
    ),
    _rule(
        "LowGPUUtilization",
        "Fires when a GPU is underused or its utilization fluctuates.",
        _percent(
            "threshold_p95",
            70,
            "95th percentile of GPU utilization below which the GPU is underused.",
        ),
        _percent(
            "threshold_p5",
            10,
            "5th percentile of GPU utilization below which a busy GPU fluctuates.",
        ),
        _window(500, "Number of most recent datapoints the percentiles are computed over."),
        _patience(1000, _WAIT),
        _scan_interval(),
    ),
    _rule(
        "MaxInitializationTime",
        "Fires when the first step takes too long to arrive.",
        _positive(
            "threshold",
            ParamType.FLOAT,
            20,
            "Minutes to wait for the first step before the rule fires.",
        ),
        _scan_interval(),
    ),
    _rule(
        "OverallFrameworkMetrics",
        "Summarizes the time spent in framework operations; it never fires.",
        _scan_interval(in_rulesconfig=False),
    ),
    _rule(
        "OverallSystemUsage",
        "Summarizes CPU, GPU, memory, I/O and network use per node; it never fires.",
        _scan_interval(),
    ),
    _rule(
        "StepOutlier",
        "Fires when too many steps take much longer than the others.",
        _positive(
            "stddev",
            ParamType.FLOAT,
            3,
            "Standard deviations above the mean at which a step duration is an outlier.",
            _docs(5),
        ),
        Parameter(
            "mode",
            ParamType.STRING,
            None,
            "Mode whose steps are checked; all training and evaluation steps when unset.",
            choices=("TRAIN", "EVAL", "PREDICT", "GLOBAL"),
            source=_RULESCONFIG,
            notes="choices added by trainprobe (smdebug's mode names)",
        ),
        _positive(
            "n_outliers",
            ParamType.INTEGER,
            10,
            "Outliers to tolerate before the rule fires.",
        ),
        _scan_interval(),
    ),
)

PROFILER_REPORT = RuleSpec(
    name="ProfilerReport",
    kind="profiler",
    sdk_name="ProfilerReport",
    description="Runs every profiler rule and writes the profiler report; fires if any rule does.",
    parameters=(
        Parameter(
            "opt_out_telemetry",
            ParamType.BOOLEAN,
            False,
            "Accepted for compatibility; trainprobe never sends telemetry.",
            source="smdebug-rulesconfig 1.0.2",
            in_rulesconfig=False,
        ),
        _scan_interval(in_rulesconfig=False),
    ),
    frameworks=FRAMEWORKS,
    runs=PROFILER_RULES,
)
