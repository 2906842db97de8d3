"""``smdebug.trials.utils``: ``create_trial`` with smdebug's signature."""

from __future__ import annotations

import os
from typing import Any

from trainprobe.analysis.trial import DEFAULT_TIMEOUT, Trial
from trainprobe.analysis.trial import create_trial as _create_trial
from trainprobe.config.errors import ConfigError

__all__ = ["create_trial"]

_READER_SWITCHES = ("parallel", "check", "index_mode", "cache")


def create_trial(
    path: str | os.PathLike[str],
    name: str | None = None,
    profiler: bool = False,
    output_dir: str = "/opt/ml/processing/outputs/",
    **kwargs: Any,
) -> Trial:
    """The trial of the tensors under ``path``, as smdebug's ``create_trial`` makes it.

    ``range_steps`` limits the steps read; smdebug's reader switches (parallel, check,
    index_mode, cache) are accepted and change nothing. ``profiler=True`` (smdebug's
    ProfilerTrial) is ``trainprobe.profiler.ProfilerData`` here.
    """
    if profiler:
        raise ConfigError(
            "profiler",
            profiler,
            "False; read profiler output with trainprobe.profiler.ProfilerData(path) or "
            "smdebug.profiler.analysis.notebook_utils.training_job.TrainingJob",
        )
    unknown = sorted(set(kwargs) - {"range_steps", *_READER_SWITCHES})
    if unknown:
        raise ConfigError("create_trial", unknown[0], "range_steps, " + ", ".join(_READER_SWITCHES))
    return _create_trial(
        os.fspath(path), name, timeout=DEFAULT_TIMEOUT, range_steps=kwargs.get("range_steps")
    )
