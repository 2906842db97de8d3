"""Which job a user means, from a path into its output or from its name: one answer for all.

``trainprobe report``, ``trainprobe rules run`` and ``python -m trainprobe.report`` take either;
a path is read as ``storage.job_layout.job_dir_of`` reads it, a name is looked up in the job
store.
"""

from __future__ import annotations

from trainprobe.config.errors import ConfigError
from trainprobe.jobs.operations.describe import find_job, layout_at, layout_of
from trainprobe.jobs.store import JobStore
from trainprobe.storage import files
from trainprobe.storage.job_layout import JobLayout, job_dir_of

__all__ = ["locate_job"]

_WHAT = (
    "a job's name, a job's directory, its debug-output or profiler-output, or one rule's "
    "output under its rule-output/"
)


def locate_job(name_or_path: str, store: JobStore | None = None) -> JobLayout:
    """The layout of the job that ``name_or_path`` names.

    An existing path is a job's directory or a directory in it (see ``job_dir_of``); the
    layout is the one its launch plan recorded, else SageMaker's default under the directory's
    parent. Anything else is a job's name in ``store`` (default: the user's job store):
    JobNotFound, a ConfigError, when there is none.
    """
    if files.exists(name_or_path):
        found = job_dir_of(name_or_path)
        if found is None:
            raise ConfigError("path", files.absolute(name_or_path), _WHAT)
        return layout_at(found[0])
    return layout_of(find_job(store or JobStore(), {"TrainingJobName": name_or_path}))
