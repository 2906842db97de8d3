"""smdebug's ``MergedTimeline`` (``merge_timelines``): one Chrome trace of a time or step range,
written into a folder under smdebug's file name.

::

    merger = TimelineMerger("my-job/profiler-output", output_directory="./")
    path = merger.merge_timeline(5, 8, unit=MergeUnit.STEP)   # steps 5, 6 and 7
    path = merger.merge_timeline(start_us, end_us)            # microseconds since the epoch

The file is ``<output_directory>/<end us>_<pid>-<host>_merged_timeline.json`` (default folder:
the profiler output itself), written by ``merged_timeline.merge_timeline``: the system metrics
as counters, the step timeline and the torch.profiler traces. ``file_suffix_filter`` keeps the
sources smdebug's suffixes name (``pythontimeline.json`` the timeline, ``trace.json.gz`` or
``model_timeline.json`` the detailed traces); an empty ``sys_metrics_filter`` leaves the
system metrics out, as in smdebug.
"""

from __future__ import annotations

import logging
import os
import socket
from enum import Enum
from typing import Any

from trainprobe.analysis.profiling_data.merged_timeline import merge_timeline
from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.analysis.profiling_data.selection import Selection
from trainprobe.config.errors import ConfigError
from trainprobe.storage import files
from trainprobe.storage.locations import join

__all__ = ["MERGED_TIMELINE_SUFFIX", "MergeUnit", "TimelineMerger"]

log = logging.getLogger("trainprobe")

MERGED_TIMELINE_SUFFIX = "merged_timeline.json"
_TIMELINE_SUFFIXES = ("pythontimeline.json",)
_DETAILED_SUFFIXES = ("trace.json.gz", "model_timeline.json", "pt.trace.json")
_WITH_SYSTEM_METRICS: dict[str, Any] = {"lowgpu": ()}
"""smdebug's default ``sys_metrics_filter``: any non-empty one adds the system metrics."""


class MergeUnit(Enum):
    """Whether ``merge_timeline``'s range is of times or of steps."""

    TIME = "time"
    STEP = "step"


def _node_id() -> str:
    """smdebug's name of this process: ``<pid>-<host>``."""
    return f"{os.getpid()}-{socket.gethostname()}".replace("_", "-")


class TimelineMerger:
    """Merges a profiler output's timelines into files in ``output_directory``."""

    def __init__(
        self,
        path: str,
        file_suffix_filter: list[str] | None = None,
        output_directory: str | None = None,
    ) -> None:
        self.path = str(path).strip()
        self.out_dir = self.path if output_directory is None else str(output_directory)
        self.file_suffix_filter = file_suffix_filter
        self._output = ProfilerOutput(self.path)

    def _keeps(self, suffixes: tuple[str, ...]) -> bool:
        chosen = self.file_suffix_filter
        return chosen is None or any(
            s.endswith(k) or k.endswith(s) for s in chosen for k in suffixes
        )

    def merge_timeline(
        self,
        start: float,
        end: float,
        unit: MergeUnit | str = MergeUnit.TIME,
        sys_metrics_filter: dict[str, Any] | None = _WITH_SYSTEM_METRICS,
    ) -> str:
        """Write the merged trace of ``start`` to ``end`` (microseconds since the epoch, or
        steps with ``unit=MergeUnit.STEP``: to the start of step ``end``, as smdebug merges)
        and return its path."""
        by_step = unit == MergeUnit.STEP or unit == "step"
        if not by_step and unit not in (MergeUnit.TIME, "time"):
            raise ConfigError("unit", unit, "MergeUnit.TIME or MergeUnit.STEP")
        if by_step:
            selection = Selection.of(None, None, int(start), int(end), None)
            bounds = selection.time_bounds(self._output.steps().spans())
            end_us = bounds[1] if bounds is not None else float(end)
        else:
            selection = Selection.of(start, end, None, None, None)
            end_us = float(end)
        files.prepare_directory(self.out_dir)
        name = f"{round(end_us)}_{_node_id()}_{MERGED_TIMELINE_SUFFIX}"
        out_file = join(self.out_dir, name)
        merge_timeline(
            self._output,
            out_file,
            selection,
            system=bool(sys_metrics_filter),
            framework=self._keeps(_TIMELINE_SUFFIXES),
            detailed=self._keeps(_DETAILED_SUFFIXES),
        )
        log.info("Merged timeline saved at: %s", out_file)
        return out_file
