"""Reading a job's profiling data back: ``from trainprobe.profiler import ProfilerData``.

::

    data = ProfilerData("my-job/profiler-output")
    data.system_metrics(start_step=5, end_step=8)    # DataFrame, each reading with its step
    data.framework_events(start_us=t0, end_us=t1)
    data.steps()                                     # step durations per node and mode
    data.top_functions(start_step=9, end_step=10)    # from the Python profiles
    data.merge_timeline("timeline.json")             # one Chrome trace; open it in Perfetto

It reads what trainprobe's system monitor and framework profiler wrote, and smdebug's and
SageMaker's files of the same layout. The DataFrames need pandas (``trainprobe[profiler]``);
``merge_timeline`` does not. From a shell::

    python -m trainprobe.profiler merge PROFILER_OUTPUT --out timeline.json [--start-step N]
        [--end-step N] [--start-us T] [--end-us T] [--mode TRAIN]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trainprobe.analysis.profiling_data.merged_timeline import MergedTimeline
from trainprobe.analysis.profiling_data.merged_timeline import merge_timeline as _merge
from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.analysis.profiling_data.python_profiles import FunctionStats, PythonProfile
from trainprobe.analysis.profiling_data.selection import Selection
from trainprobe.analysis.profiling_data.steps import StepSpan
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys

if TYPE_CHECKING:
    from trainprobe.analysis.profiling_data.data import ProfilerData

__all__ = [
    "FunctionStats",
    "MergedTimeline",
    "ModeKeys",
    "ProfilerData",
    "ProfilerOutput",
    "PythonProfile",
    "StepSpan",
    "main",
    "merge_timeline",
]


def __getattr__(name: str) -> Any:
    # ProfilerData needs pandas: imported on first use, so merging works without it.
    if name == "ProfilerData":
        from trainprobe.analysis.profiling_data.data import ProfilerData

        return ProfilerData
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def merge_timeline(
    path: str | os.PathLike[str],
    out_file: str | os.PathLike[str],
    start_us: float | None = None,
    end_us: float | None = None,
    *,
    start_step: int | None = None,
    end_step: int | None = None,
    mode: ModeKeys | str | None = None,
) -> MergedTimeline:
    """Write one Chrome trace of the profiler output under ``path`` (see ``ProfilerData``)."""
    selection = Selection.of(start_us, end_us, start_step, end_step, mode)
    return _merge(ProfilerOutput(os.fspath(path)), os.fspath(out_file), selection)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainprobe.profiler merge PATH --out FILE``: 0 when written, 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="python -m trainprobe.profiler",
        description="Read a job's profiler output back.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    merge = commands.add_parser(
        "merge", help="write one Chrome trace (Perfetto) of system metrics, steps and traces"
    )
    merge.add_argument("path", help="the profiler output directory (<job>/profiler-output)")
    merge.add_argument("--out", required=True, help="the trace file to write")
    merge.add_argument("--start-step", type=int, help="first global step")
    merge.add_argument("--end-step", type=int, help="step to stop before")
    merge.add_argument("--start-us", type=float, help="start, microseconds since the epoch")
    merge.add_argument("--end-us", type=float, help="end, microseconds since the epoch")
    merge.add_argument("--mode", help="only this mode's steps: TRAIN, EVAL, PREDICT, GLOBAL")
    arguments = parser.parse_args(argv)
    try:
        written = merge_timeline(
            arguments.path,
            arguments.out,
            arguments.start_us,
            arguments.end_us,
            start_step=arguments.start_step,
            end_step=arguments.end_step,
            mode=arguments.mode,
        )
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"wrote {written.path}: {written.framework_events} framework events, "
        f"{written.counter_events} system samples, {written.detailed_events} detailed events"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
