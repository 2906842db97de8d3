"""``smdebug.profiler.profiler_constants``: where the framework timeline is written, and the
names of its files (``DEFAULT_PREFIX``, the timeline suffixes), as trainprobe writes them.

trainprobe writes the Python timeline (``pythontimeline.json``) and the detailed profiles; the
other suffixes name files that smdebug wrote for frameworks and libraries trainprobe does not
profile (Horovod, SMDataParallel), which trainprobe never writes.
"""

from trainprobe.storage.trace_file import PEVENTS_DIR, TIMELINE_SUFFIX

DEFAULT_PREFIX = PEVENTS_DIR
DEFAULT_SYSTEM_PROFILER_PREFIX = "system"
TRACE_DIRECTORY_FORMAT = "%Y%m%d%H"
PYTHONTIMELINE_SUFFIX = TIMELINE_SUFFIX
MODELTIMELINE_SUFFIX = "model_timeline.json"
TENSORBOARDTIMELINE_SUFFIX = "trace.json.gz"
HOROVODTIMELINE_SUFFIX = "horovod_timeline.json"
SMDATAPARALLELTIMELINE_SUFFIX = "smdataparallel_timeline.json"
MERGEDTIMELINE_SUFFIX = "merged_timeline.json"

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_SYSTEM_PROFILER_PREFIX",
    "HOROVODTIMELINE_SUFFIX",
    "MERGEDTIMELINE_SUFFIX",
    "MODELTIMELINE_SUFFIX",
    "PYTHONTIMELINE_SUFFIX",
    "SMDATAPARALLELTIMELINE_SUFFIX",
    "TENSORBOARDTIMELINE_SUFFIX",
    "TRACE_DIRECTORY_FORMAT",
]
