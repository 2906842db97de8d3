"""The arguments every framework's hook takes alike, checked and read in one way.

smdebug's hooks share a constructor: ``out_dir``, ``export_tensorboard``/``tensorboard_dir`` and
``include_workers`` mean the same for PyTorch and XGBoost, so both hooks read them here.
"""

from __future__ import annotations

import os

from trainprobe.config.errors import ConfigError
from trainprobe.storage.step_file import training_has_ended

__all__ = ["check_include_workers", "output_directory", "tensorboard_directory"]


def output_directory(out_dir: str | os.PathLike[str] | None) -> str:
    """``out_dir`` as a path; ConfigError when it is missing or holds a finished run."""
    if out_dir is None or not os.fspath(out_dir):
        raise ConfigError("out_dir", out_dir, "a directory to write the tensors into")
    directory = os.fspath(out_dir)
    if training_has_ended(directory):
        raise ConfigError(
            "out_dir",
            directory,
            "a directory that does not hold a finished run (it has training_job_end.ts); "
            "choose a new directory",
        )
    return directory


def check_include_workers(include_workers: str) -> None:
    """ConfigError unless ``include_workers`` is ``"one"`` (rank 0 writes) or ``"all"``."""
    if include_workers not in ("one", "all"):
        raise ConfigError("include_workers", include_workers, "'one' or 'all'")


def tensorboard_directory(
    export: bool, directory: str | os.PathLike[str] | None, out_dir: str
) -> str | None:
    """Where TensorBoard output goes: the directory given, else ``<out_dir>/tensorboard`` when
    ``export``, else None (no export)."""
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise ConfigError("tensorboard_dir", directory, "a directory path or None")
    if directory is not None and os.fspath(directory):
        return os.path.expanduser(os.fspath(directory))
    if export:
        return os.path.join(out_dir, "tensorboard")
    return None
