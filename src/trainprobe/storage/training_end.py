"""The marker that says a job's tensors are all written: an empty ``training_job_end.ts``.

Readers that follow a job stop waiting for new steps once they see it.
"""

from __future__ import annotations

from trainprobe.storage import files, locations

__all__ = ["training_has_ended", "write_training_end"]


def write_training_end(out_dir: str) -> None:
    """Mark the output under ``out_dir`` as finished (no more steps will be written)."""
    files.write_atomic(locations.join(out_dir, locations.TRAINING_END_FILE), b"")


def training_has_ended(out_dir: str) -> bool:
    """Whether the output under ``out_dir`` has been marked as finished."""
    return files.exists(locations.join(out_dir, locations.TRAINING_END_FILE))
