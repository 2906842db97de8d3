"""The errors a trial raises, importable as smdebug users import ``smdebug.exceptions``.

See ``trainprobe.analysis.exceptions`` for the hierarchy; configuration errors are
``trainprobe.config.errors.ConfigError``.
"""

from __future__ import annotations

from trainprobe.analysis.exceptions import (
    IndexReaderException,
    InvalidWorker,
    MissingCollectionFiles,
    NoMoreData,
    ShapeUnavailableForStep,
    StepNotYetAvailable,
    StepUnavailable,
    TensorRecordDamaged,
    TensorUnavailable,
    TensorUnavailableForStep,
    TrainprobeAnalysisError,
)

__all__ = [
    "IndexReaderException",
    "InvalidWorker",
    "MissingCollectionFiles",
    "NoMoreData",
    "ShapeUnavailableForStep",
    "StepNotYetAvailable",
    "StepUnavailable",
    "TensorRecordDamaged",
    "TensorUnavailable",
    "TensorUnavailableForStep",
    "TrainprobeAnalysisError",
]
