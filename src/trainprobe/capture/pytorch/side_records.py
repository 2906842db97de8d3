"""What the PyTorch hook writes beside the tensors: its side records.

Four small files, each written on the writer thread (never on the training's), each by its module
in ``trainprobe.storage``:

- the **module types** of the registered models, for the rules that judge layers by kind
  (``module_types_file``), once new modules have been registered;
- **where the first NaN started**, the non-finite guard's finding (``nonfinite_file``);
- the in-training rules' **spikes** and how many steps they judged (``spike_records``);
- the hook's own **overhead**, its time per step and the bytes it wrote (``capture.overhead``):
  reserved at the first step, rewritten at a step boundary at most every ``every`` seconds,
  and at the end.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

from trainprobe.capture.overhead import HookOverhead, OverheadFile
from trainprobe.capture.pytorch.module_types import ModuleTypes
from trainprobe.capture.pytorch.step_capture import StepCapture
from trainprobe.capture.writer_thread import SideJob
from trainprobe.storage.module_types_file import write_module_types
from trainprobe.storage.nonfinite_file import NonFiniteOrigin, write_nonfinite_origin
from trainprobe.storage.spike_records import SpikeRecord, write_spikes

__all__ = ["SideRecords"]

log = logging.getLogger("trainprobe")


class SideRecords:
    """Hands the writer thread of ``capture`` the side records of a hook writing into
    ``out_dir`` (see the module docstring); each file's bytes count in ``overhead``; the
    overhead is written every ``every`` seconds."""

    def __init__(
        self,
        out_dir: str,
        capture: StepCapture,
        overhead: HookOverhead,
        module_types: ModuleTypes,
        every: float,
    ) -> None:
        self.out_dir = out_dir
        self.overhead = overhead
        self.module_types = module_types
        self.overhead_file = OverheadFile(out_dir, overhead)
        self._capture = capture
        self._overhead_due_at = time.monotonic() + every

    def _worker(self) -> str:
        return self._capture.resolve_worker().name

    def _submit(self, write: Callable[[], None]) -> None:
        self._capture.ensure_writer().submit(SideJob(write))

    def overhead_if_due(self, every: float) -> None:
        """Have the writer thread save the overhead so far, when ``every`` seconds have passed
        since it last did."""
        if not self.overhead_file.reserved:
            self.overhead_file.reserved = True
            self._submit(functools.partial(self.overhead_file.reserve, self._worker()))
        now = time.monotonic()
        if now < self._overhead_due_at or not self.overhead_file.enabled:
            return
        self._overhead_due_at = now + every
        self._submit(functools.partial(self.overhead_file.write, self._worker()))

    def final_overhead(self) -> None:
        """Write the overhead now and release its file (the writer thread has stopped)."""
        worker = self._worker()
        self.overhead_file.write(worker)
        self.overhead_file.release(worker)

    def module_types_if_new(self) -> None:
        """Have the writer thread record the module types, if some are not written yet."""
        if not self.module_types.unwritten:
            return
        self.module_types.unwritten = False
        out_dir, worker = self.out_dir, self._worker()
        modules = dict(self.module_types.modules)

        def write() -> None:
            self.overhead.file_bytes += write_module_types(out_dir, worker, modules)

        self._submit(write)

    def nonfinite_origin(self, origin: NonFiniteOrigin) -> None:
        """Have the writer thread record where the first NaN started (said in the log too)."""
        out_dir, worker = self.out_dir, self._worker()
        log.warning("trainprobe: %s", origin.describe())

        def write() -> None:
            self.overhead.file_bytes += write_nonfinite_origin(out_dir, worker, origin)

        self._submit(write)

    def spikes(
        self,
        records: list[SpikeRecord],
        judged: dict[str, dict[str, int]],
        names: dict[str, str],
    ) -> None:
        """Have the writer thread rewrite the spikes found so far, with the steps judged (by a
        worker that writes)."""
        if not self._capture.writes:
            return
        out_dir, worker = self.out_dir, self._worker()

        def write() -> None:
            self.overhead.file_bytes += write_spikes(out_dir, worker, records, judged, names)

        self._submit(write)
