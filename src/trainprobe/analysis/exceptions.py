"""What reading a trial can raise, named as smdebug names it so that ported code catches it.

::

    AnalysisError (trainprobe.errors; also named TrainprobeAnalysisError)
    ├── TensorUnavailable          the tensor was never saved
    ├── TensorUnavailableForStep   saved, but not at this step (maybe only its reductions)
    │   └── TensorRecordDamaged    saved, but its record's file is damaged (checksum, truncation)
    ├── ShapeUnavailableForStep    neither its shape nor its value was saved at this step
    ├── StepUnavailable            the step was skipped: nothing was saved at it
    ├── StepNotYetAvailable        the job is still running and has not written the step yet
    ├── NoMoreData                 the job has ended before reaching the step
    ├── InvalidWorker              no such worker wrote the step
    ├── MissingCollectionFiles     no collections file (empty, missing or unfinished output)
    └── IndexReaderException       an index file cannot be read
"""

from __future__ import annotations

from trainprobe.errors import AnalysisError
from trainprobe.storage.modes import ModeKeys

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


TrainprobeAnalysisError = AnalysisError
"""The base of every error raised while reading a trial (``trainprobe.errors.AnalysisError``)."""


class TensorUnavailable(TrainprobeAnalysisError):
    """The tensor ``tname`` was never saved (or has not been written yet)."""

    def __init__(self, tname: str) -> None:
        self.tname = tname
        super().__init__(f"Tensor {tname} was not saved.")


class TensorUnavailableForStep(TrainprobeAnalysisError):
    """The tensor exists, but its value was not saved at this step."""

    def __init__(
        self,
        tname: str,
        step: int,
        mode: ModeKeys = ModeKeys.GLOBAL,
        has_reductions: bool = False,
    ) -> None:
        self.tname = tname
        self.step = step
        self.mode = mode
        self.has_reductions = has_reductions
        message = (
            f"Value for tensor {tname} is not available for step {step} "
            f"with mode {mode.name} as it was not saved."
        )
        if has_reductions:
            message += " Its reductions were saved for this step: ask for reduction_value()."
        super().__init__(message)


class TensorRecordDamaged(TensorUnavailableForStep):
    """The tensor was saved at this step, but its record cannot be read back as written.

    Its bytes changed after writing (they fail their checksum), or its event file is truncated
    or malformed. Only that record is lost: code that skips values unavailable at a step skips
    it too. ``path`` is the event file, ``reason`` what is wrong with it.
    """

    def __init__(self, tname: str, step: int, mode: ModeKeys, path: str, reason: str) -> None:
        self.tname = tname
        self.step = step
        self.mode = mode
        self.has_reductions = False
        self.path = path
        self.reason = reason
        TrainprobeAnalysisError.__init__(
            self,
            f"Tensor {tname} at step {step} with mode {mode.name} cannot be read: its record in "
            f"{path} is damaged ({reason}). The file changed after it was written; other "
            "steps are not affected.",
        )


class ShapeUnavailableForStep(TrainprobeAnalysisError):
    """Neither the tensor's shape nor its value was saved at this step."""

    def __init__(self, tname: str, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> None:
        self.tname = tname
        self.step = step
        self.mode = mode
        super().__init__(
            f"Shape for tensor {tname} is not available for step {step} "
            f"with mode {mode.name} as it was not saved."
        )


class StepUnavailable(TrainprobeAnalysisError):
    """Nothing was saved at this step: the save schedule skipped it."""

    def __init__(self, step: int, mode: ModeKeys) -> None:
        self.step = step
        self.mode = mode
        super().__init__(f"Step {step} of mode {mode.name} is not available as it was not saved")


class StepNotYetAvailable(TrainprobeAnalysisError):
    """The job is still running and has not (completely) written this step yet."""

    def __init__(self, step: int, mode: ModeKeys) -> None:
        self.step = step
        self.mode = mode
        super().__init__(f"Step {step} of mode {mode.name} not yet available")


class NoMoreData(TrainprobeAnalysisError):
    """The job has ended, and the step is beyond the last one it saved."""

    def __init__(self, step: int, mode: ModeKeys, last_step: int) -> None:
        self.step = step
        self.mode = mode
        self.last_step = last_step
        super().__init__(
            f"Looking for step {step} of mode {mode.name} and reached end of training. "
            f"Max step available is {last_step}"
        )


class InvalidWorker(TrainprobeAnalysisError):
    """No worker of that name wrote the step asked for."""

    def __init__(self, worker: str, known: list[str] | None = None) -> None:
        self.worker = worker
        message = f"Invalid Worker: {worker}"
        if known:
            message += f"; the workers that wrote this step are {', '.join(known)}"
        super().__init__(message)


class MissingCollectionFiles(TrainprobeAnalysisError):
    """The output has no collections file: wrong path, nothing saved yet, or nothing at all."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message or "Training job has ended. All the collection files could not be loaded"
        )


class IndexReaderException(TrainprobeAnalysisError):
    """An index file is empty, damaged, or not an index file."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)
