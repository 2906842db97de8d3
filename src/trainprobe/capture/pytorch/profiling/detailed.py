"""Detailed profiling: ``torch.profiler`` over a range of steps, saved as a Chrome trace.

smdebug's detailed profiling drove private autograd-profiler calls that stopped working after
PyTorch 1.8; this uses the public ``torch.profiler.profile``: CPU activity, and CUDA activity when
a GPU is present, with ``record_shapes`` and ``profile_memory`` (the flight recorder leaves
memory out: PyTorch's CPU allocator then warns on the training's standard error about every
thousandth block freed that was allocated before the profile). Each profiled step is marked
``ProfilerStep#<step>`` in the trace (the mark ``profile.step()`` puts there under a schedule),
so TensorBoard's and HTA's readers find the steps. The profiler library's own messages are kept
out of the training's output (``settings.KINETO_LOG_LEVEL``).

The trace goes to ``framework/pytorch/detailed_profiling/<YYYYMMDDHH>/<startstep:09>/
<node>.<startUs>.pt.trace.json`` (see ``trainprobe.storage.trace_file``), exported to a temporary
file and then written atomically, so a reader never sees part of it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time

import torch

from trainprobe import settings
from trainprobe.storage import files
from trainprobe.storage.locations import join
from trainprobe.storage.trace_file import detailed_profiling_file

__all__ = ["DetailedProfiling"]


class DetailedProfiling:
    """One ``torch.profiler`` session at a time, started and stopped at step starts
    (``memory``: with the allocations and frees)."""

    def __init__(
        self, out_dir: str, node_id: str, framework: str = "pytorch", *, memory: bool = True
    ) -> None:
        self.out_dir = out_dir
        self.node_id = node_id
        self.framework = framework
        self.memory = memory
        self.written: list[str] = []
        self._profile: torch.profiler.profile | None = None
        self._start_step = 0
        self._start_us = 0.0
        self._step_mark: torch.profiler.record_function | None = None

    @property
    def running(self) -> bool:
        """Whether a session is recording."""
        return self._profile is not None

    def start(self, step: int) -> None:
        """Start recording at the start of ``step``."""
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        profile = torch.profiler.profile(
            activities=activities, record_shapes=True, profile_memory=self.memory
        )
        settings.set_unless_set(settings.KINETO_LOG_LEVEL, settings.KINETO_QUIET)
        profile.start()
        self._profile = profile
        self._start_step = step
        self._start_us = time.time() * 1e6
        self.step_started(step)

    def step_started(self, step: int) -> None:
        """Mark the start of ``step`` in the trace (``ProfilerStep#<step>``)."""
        self._end_step_mark()
        if self._profile is not None:
            mark = torch.profiler.record_function(f"ProfilerStep#{step}")
            mark.__enter__()  # type: ignore[no-untyped-call]
            self._step_mark = mark

    def _end_step_mark(self) -> None:
        mark, self._step_mark = self._step_mark, None
        if mark is not None:
            mark.__exit__(None, None, None)

    def abandon(self) -> None:
        """Stop recording without writing the trace."""
        self._end_step_mark()
        profile, self._profile = self._profile, None
        if profile is not None:
            profile.stop()

    def stop(self) -> str | None:
        """Stop recording and write the trace; returns its path (None if none was running)."""
        if self._profile is None:
            self._end_step_mark()
            return None
        path = join(
            self.out_dir,
            detailed_profiling_file(self.framework, self._start_step, self._start_us, self.node_id),
        )
        self.stop_into(path)
        return path

    def stop_into(self, path: str, max_bytes: int | None = None) -> int:
        """Stop recording and write the trace to ``path``; returns its size in bytes.

        A trace over ``max_bytes`` is not written (the size says why); nothing running: 0.
        """
        self._end_step_mark()
        profile, self._profile = self._profile, None
        if profile is None:
            return 0
        profile.stop()
        handle, exported = tempfile.mkstemp(suffix=".pt.trace.json")
        os.close(handle)
        try:
            profile.export_chrome_trace(exported)
            size = os.path.getsize(exported)
            if max_bytes is None or size <= max_bytes:
                files.write_atomic(path, files.read_bytes(exported))
                self.written.append(path)
        finally:
            with contextlib.suppress(OSError):
                os.remove(exported)
        return size
