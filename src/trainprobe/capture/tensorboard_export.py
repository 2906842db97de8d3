"""TensorBoard export: the scalars and histograms of saved tensors, for ``tensorboard --logdir``.

The hook's writer thread calls ``add`` for each tensor it writes at a save step, with the
collection that decided the summary (``summary_for`` picks it, as smdebug did):

- a tensor of a scalar collection (``losses``, ``metrics``, ``sm_metrics``, ...), a reduction
  (``smdebug/reductions/...``) and a ``save_scalar`` value become a scalar summary tagged with
  the tensor's name;
- any other tensor whose collection has ``save_histogram`` becomes a histogram tagged
  ``<collection>/<tensor>``, computed from the raw value even when only reductions are saved.

Steps are global steps; each mode is its own run (``<tensorboard_dir>/TRAIN``, ``EVAL``, ...), see
``trainprobe.storage.tensorboard_events`` for the files. The export is a side output: a failure
(an unwritable directory, a full disk, a value it cannot read) is logged once, the export turns
itself off, and the training and the tensor files go on untouched. Nothing here ever raises.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from trainprobe.capture.collections import SCALAR_COLLECTIONS, Collection
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.tensorboard_events import TensorBoardWriter, histogram_of

__all__ = ["Summary", "TensorBoardExport", "summary_for"]

log = logging.getLogger("trainprobe")


class Summary(NamedTuple):
    """What TensorBoard gets of a tensor: the deciding collection, and scalar or histogram."""

    collection: str
    scalar: bool


def summary_for(collections: Iterable[Collection]) -> Summary | None:
    """The summary of a tensor saved in ``collections`` at this step, or None for no summary.

    A scalar collection wins (a scalar summary); otherwise the first collection that wants
    histograms gives the histogram its tag prefix. The answer depends only on the collections,
    so the hook can keep it per set of due collections.
    """
    histogram: Summary | None = None
    for collection in collections:
        if collection.name in SCALAR_COLLECTIONS:
            return Summary(collection.name, scalar=True)
        if histogram is None and collection.save_histogram:
            histogram = Summary(collection.name, scalar=False)
    return histogram


class TensorBoardExport:
    """Scalars and histograms of saved tensors, written under ``tensorboard_dir``.

    Owned by one thread (the hook's writer thread). ``enabled`` turns False after the first
    failure or ``close()``; ``error`` keeps the failure.
    """

    def __init__(self, tensorboard_dir: str) -> None:
        self.tensorboard_dir = tensorboard_dir
        self.enabled = True
        self.error: BaseException | None = None
        self._writer = TensorBoardWriter(tensorboard_dir)

    @property
    def bytes_written(self) -> int:
        """Bytes of TensorBoard files written so far."""
        return self._writer.bytes_written

    def add(
        self,
        mode: ModeKeys,
        global_step: int,
        collection_name: str,
        tensor_name: str,
        array: np.ndarray,
        scalar: bool,
        *,
        wall_time: float | None = None,
    ) -> None:
        """Export one tensor saved at ``global_step`` of ``mode``: a scalar or a histogram.

        ``scalar`` values must hold a single number (others are skipped, as smdebug skips
        them); histograms skip booleans, complex numbers, strings and empty tensors, and leave
        out values that are not finite.
        """
        if not self.enabled:
            return
        try:
            value = np.asarray(array)
            if scalar:
                if value.size == 1 and value.dtype.kind in "biuf":
                    self._writer.add_scalar(
                        mode,
                        tensor_name,
                        float(value.reshape(-1)[0]),
                        step=global_step,
                        wall_time=wall_time,
                    )
                else:
                    log.debug(
                        "trainprobe: %s is not a single number; no scalar summary", tensor_name
                    )
                return
            if value.size == 0 or value.dtype.kind not in "iuf":
                return
            histogram = histogram_of(value)
            if histogram is not None:
                self._writer.add_histogram(
                    mode,
                    f"{collection_name}/{tensor_name}",
                    histogram,
                    step=global_step,
                    wall_time=wall_time,
                )
        except Exception as error:
            self._fail(error)

    def flush(self) -> None:
        """Write what is queued now (the hook calls it when a step's files are closed)."""
        if not self.enabled:
            return
        try:
            self._writer.flush()
        except Exception as error:
            self._fail(error)

    def close(self) -> None:
        """Write what is queued and close the files. Safe to call more than once."""
        was_enabled, self.enabled = self.enabled, False
        try:
            self._writer.close()
        except Exception as error:
            if was_enabled:
                self._report(error)

    def _fail(self, error: BaseException) -> None:
        self.enabled = False
        self._report(error)
        try:
            self._writer.close()
        except Exception:
            log.debug("trainprobe: closing the TensorBoard files after a failure failed too")

    def _report(self, error: BaseException) -> None:
        if self.error is not None:
            return
        self.error = error
        log.error(
            "trainprobe: TensorBoard export to %s failed and stops for the rest of this run "
            "(%s: %s). Training continues and tensors are still saved; TensorBoard files "
            "already written stay readable.",
            self.tensorboard_dir,
            type(error).__name__,
            error,
        )
