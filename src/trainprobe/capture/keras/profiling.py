"""Framework profiling of a Keras training, as the job's ProfilerConfig asks.

When a ProfilerConfig file is present (``$TRAINPROBE_PROFILER_CONFIG``, as ``trainprobe run``
sets it, or smdebug's ``$SMPROFILER_CONFIG_PATH``) and it has a ``FrameworkProfile``:

- **the step timeline**, every step: one ``Step:ModeKeys.<MODE>`` event from a batch's start
  (Keras's ``on_*_batch_begin``) to the next batch's start or the end of its epoch, evaluation or
  prediction, with ``step_num`` (the step within its mode, as text, as smdebug writes it),
  ``global_step``, ``mode`` and ``pid``. Keras compiles forward, backward and update into one
  step function, so a step has no finer phases; the hook's own saving shows as ``trainprobe``.
- **detailed profiling** over ``FrameworkProfile``'s detailed range (global steps), with the
  backend's own profiler: ``tf.profiler`` (TensorBoard's profile plugin files), ``jax.profiler``
  (a Perfetto trace), or ``torch.profiler`` (a Chrome trace), under
  ``framework/<backend>/detailed_profiling/<hour>/<start step>/``.

The files are the step timeline's (``storage.trace_file``), so the profiler rules, the report and
the UI read a Keras job's steps as any other's. The configuration is read once, when the hook is
made. A failure here is logged once and profiling stops; the training and the hook go on.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from trainprobe.capture.profiler_config_file import ProfilerConfigFile, find_profiler_config
from trainprobe.config.metrics_config import StepWindow
from trainprobe.config.profiler_config import ProfilerConfig, ProfilingPlan
from trainprobe.storage import files
from trainprobe.storage.locations import join
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.trace_file import TraceFileWriter, detailed_profiling_file

__all__ = ["KerasProfiler"]

log = logging.getLogger("trainprobe")

HOOK_PHASE = "trainprobe"
"""The phase of the hook's own saving in the timeline."""

_FRAMEWORK = {"tensorflow": "tensorflow", "jax": "jax", "torch": "pytorch"}


def _plan(config: ProfilerConfig) -> ProfilingPlan:
    plan = config.profiling_plan()
    if config.framework_profile_params is None:
        plan = replace(plan, enabled=False)
    return plan


def _now_us() -> float:
    return time.time() * 1e6


class KerasProfiler:
    """The step timeline and detailed profiling of one Keras training process."""

    def __init__(self, plan: ProfilingPlan, backend: str, node_id: str | None = None) -> None:
        self.plan = plan
        self.backend = backend
        self.out_dir = plan.trace_files.local_path
        self.node_id = node_id or f"{os.getpid()}-{_host()}"
        order = [mode.step_phase for mode in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)]
        self._trace = TraceFileWriter(
            self.out_dir,
            self.node_id,
            max_file_size=plan.trace_files.file_max_size,
            close_interval=plan.trace_files.file_close_interval,
            phase_order=[*order, HOOK_PHASE],
        )
        self._open: tuple[ModeKeys, int, int, float] | None = None
        self._detailed: Any = None
        self._detailed_end = -1
        self._failed = False

    @classmethod
    def from_environment(
        cls, backend: str, on_error: Callable[[BaseException], None]
    ) -> KerasProfiler | None:
        """The profiler this process's ProfilerConfig asks for; None when there is none, when it
        profiles no framework, or when it cannot be used (logged)."""
        path = find_profiler_config()
        if path is None:
            return None
        try:
            plan = ProfilerConfigFile(path, _plan).read()
        except Exception as error:
            on_error(error)
            log.error(
                "trainprobe: framework profiling is off for this run: its configuration cannot "
                "be used (%s: %s)",
                type(error).__name__,
                error,
            )
            return None
        return cls(plan, backend) if plan.enabled else None

    # ----- the step timeline -----

    def step_started(self, mode: ModeKeys, step: int, mode_step: int) -> None:
        """A step of ``mode`` starts now (global ``step``, ``mode_step`` within its mode)."""
        if self._failed:
            return
        try:
            self._end_step()
            self._open = (mode, step, mode_step, _now_us())
            self._detailed_at(step)
        except Exception as error:
            self._fail(error)

    def step_ended(self) -> None:
        """The step in progress has ended (the next one may start at once)."""
        if self._failed:
            return
        try:
            self._end_step()
        except Exception as error:
            self._fail(error)

    def hook_time(self, started_us: float, step: int) -> None:
        """The hook spent from ``started_us`` until now saving ``step``."""
        if not self._failed:
            now = _now_us()
            self._trace.add(
                HOOK_PHASE, "save", started_us, now - started_us, {"step_num": str(step)}
            )

    def run_ended(self) -> None:
        """An epoch, evaluation or prediction ended: no step is in progress."""
        self.step_ended()

    def _end_step(self) -> None:
        if self._open is None:
            return
        mode, step, mode_step, start = self._open
        self._open = None
        args = {
            "step_num": str(mode_step),
            "global_step": step,
            "mode": mode.name,
            "pid": os.getpid(),
        }
        self._trace.add(mode.step_phase, mode.step_phase, start, _now_us() - start, args)
        if self._detailed is not None and step >= self._detailed_end:
            self._stop_detailed()

    # ----- detailed profiling -----

    def _detailed_at(self, step: int) -> None:
        window = self.plan.detailed
        if self._detailed is not None or not isinstance(window, StepWindow):
            return
        if window.start_step is None or step != window.start_step:
            return
        directory = join(
            self.out_dir,
            os.path.dirname(
                detailed_profiling_file(_FRAMEWORK[self.backend], step, _now_us(), self.node_id)
            ),
        )
        files.prepare_directory(directory)
        self._detailed = _start_backend_profiler(self.backend, directory)
        self._detailed_directory = directory
        self._detailed_end = step + max(window.num_steps, 1) - 1

    def _stop_detailed(self) -> None:
        session, self._detailed = self._detailed, None
        _stop_backend_profiler(self.backend, session, self._detailed_directory, self.node_id)

    # ----- the end -----

    def _fail(self, error: BaseException) -> None:
        self._failed = True
        log.error(
            "trainprobe: framework profiling failed and stops for the rest of this run (%s: %s); "
            "the training goes on",
            type(error).__name__,
            error,
        )

    def close(self) -> None:
        """End the step in progress and any detailed profile; finish the trace file."""
        try:
            self._end_step()
            if self._detailed is not None:
                self._stop_detailed()
        except Exception as error:
            self._fail(error)
        self._trace.close()


def _host() -> str:
    import socket

    return socket.gethostname().replace("_", "-")


def _start_backend_profiler(backend: str, directory: str) -> Any:
    if backend == "tensorflow":
        import tensorflow as tf

        tf.profiler.experimental.start(directory)
        return tf
    if backend == "jax":
        import jax

        jax.profiler.start_trace(directory, create_perfetto_trace=True)
        return jax
    import torch

    profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    profile.__enter__()  # type: ignore[no-untyped-call]
    return profile


def _stop_backend_profiler(backend: str, session: Any, directory: str, node_id: str) -> None:
    if backend == "tensorflow":
        session.profiler.experimental.stop()
    elif backend == "jax":
        session.profiler.stop_trace()
    else:
        session.__exit__(None, None, None)
        session.export_chrome_trace(join(directory, f"{node_id}.{int(_now_us())}.pt.trace.json"))
