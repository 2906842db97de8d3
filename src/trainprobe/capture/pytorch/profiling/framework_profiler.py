"""``FrameworkProfiler``: framework profiling of a PyTorch training, as a ProfilerConfig asks.

Usage, on its own or created by the tensor hook::

    profiler = FrameworkProfiler("profilerconfig.json", out_dir)   # or a ProfilingPlan
    profiler.register_module(model)
    for inputs, labels in loader:        # each forward of the model is one step (the first is 0)
        ...
    profiler.close()

While framework profiling is on (the config has a ``FrameworkProfile`` and ``DisableProfiler`` is
false) it writes, under ``out_dir`` (by default the config's ``LocalPath``), the layout of
``trainprobe.storage.trace_file``:

- the step timeline for every step: step, forward, backward, optimizer step and data wait
  (``trainprobe.capture.pytorch.profiling.timeline``), cheap enough to leave on;
- over the detailed profiling range, a ``torch.profiler`` trace (``.detailed``);
- over the data loader profiling range, the DataLoader's batches, waits and worker processes
  (``.dataloader``);
- over the Python profiling range, cProfile or Pyinstrument profiles per step segment, and one
  from the profiler's creation to step 0 (``.python_profiling``).

Where the moments come from: the step events of a training follower
(``trainprobe.capture.pytorch.training_follower``): the hook's, which the profiler it makes
subscribes to, or, on its own, one of the profiler's for each registered model (each forward a
step of the mode ``set_mode`` set, as smdebug's hook counts). A step's start starts it, a
forward's end ends its forward pass; a hook on the gradient of the model's output starts the
backward pass, and a callback queued to autograd's engine ends it; the updates time the optimizer,
and hand the step a timed copy of its closure, if it has one; ``torch.utils.data.DataLoader``
iteration is wrapped (``.dataloader_patch``). Ranges are in global steps, and events carry the
step within its mode. A hook's profiler attaches nothing to the model of its own.

The flight recorder rides along (``.flight_recorder``; ``TRAINPROBE_FLIGHT_RECORDER=no`` turns it
off): told of every step start, it captures the steps after a slow one, or after a request, with
torch.profiler; its hang watch writes every thread's stack when the training is stuck
(``trainprobe.capture.stack_watch``).

Given the path of a ProfilerConfig file, the profiler checks the file (one ``stat``) at a step
start at most every ``check_interval`` seconds, and applies a changed file (new ranges,
``DisableProfiler``) from that step on (``trainprobe.capture.profiler_config_file``).

A failure inside the profiler never reaches the training: it is logged once and that part (the
timeline, detailed, data loader or Python profiling) stops; files already written stay intact.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import torch

from trainprobe.capture.at_exit import close_at_exit
from trainprobe.capture.profiler_config_file import ProfilerConfigFile, find_profiler_config
from trainprobe.capture.pytorch import naming
from trainprobe.capture.pytorch.profiling import dataloader_patch
from trainprobe.capture.pytorch.profiling.flight_recorder import FlightRecorder
from trainprobe.capture.pytorch.profiling.node import default_node_id
from trainprobe.capture.pytorch.profiling.recorder import TimelineRecorder
from trainprobe.capture.pytorch.profiling.schedule import Schedules
from trainprobe.capture.pytorch.profiling.sessions import ProfilingSessions
from trainprobe.capture.pytorch.profiling.timeline import OPTIMIZER_CLOSURE, StepRecord
from trainprobe.capture.pytorch.training_follower import StepListener, StepStart, TrainingFollower
from trainprobe.capture.pytorch.training_steps import when_backward_ends, with_closure
from trainprobe.capture.stack_watch import StackWatch
from trainprobe.config.errors import ConfigError
from trainprobe.config.profiler_config import ProfilerConfig, ProfilingPlan
from trainprobe.settings import FLIGHT_RECORDER, HANG_SECONDS
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.trace_file import ProfilePoint, TimelineEvent, check_trace_node_id

__all__ = ["FrameworkProfiler", "framework_plan"]

log = logging.getLogger(__name__)

_PARTS = {
    "profiler": "framework profiling",
    "timeline": "the step timeline",
    "detailed": "detailed profiling",
    "dataloader": "data loader profiling",
    "python": "Python profiling",
    "config": "watching the profiler configuration",
    "flight": "the flight recorder",
}

_R = TypeVar("_R")


def _now_us() -> float:
    return time.time() * 1e6


def _eager(function: Callable[..., _R]) -> Callable[..., _R]:
    """``function`` run as plain Python even inside a compiled region (a graph break)."""
    return torch.compiler.disable(function)  # type: ignore[no-untyped-call,no-any-return]


def _grad_tensor(value: object, depth: int = 0) -> torch.Tensor | None:
    """The first tensor of a module's output that will receive a gradient, if any."""
    if isinstance(value, torch.Tensor):
        return value if value.requires_grad else None
    if depth > 3:
        return None
    items: Any
    if isinstance(value, (tuple, list)):
        items = value
    elif isinstance(value, Mapping):
        items = value.values()
    else:
        return None
    for item in items:
        found = _grad_tensor(item, depth + 1)
        if found is not None:
            return found
    return None


def framework_plan(config: ProfilerConfig) -> ProfilingPlan:
    """What ``config`` asks framework profiling to do (``enabled`` False: nothing at all).

    As in smdebug, a ProfilerConfig with no ``FrameworkProfile`` asks for system monitoring only.
    """
    plan = config.profiling_plan()
    if config.framework_profile_params is None:
        plan = replace(plan, enabled=False)
    return plan


class FrameworkProfiler(StepListener):
    """Profiles a PyTorch training as a ProfilerConfig says (see the module docstring).

    ``config`` is a ``ProfilingPlan`` or the path of a ProfilerConfig request JSON file (then
    watched for updates every ``check_interval`` seconds). ``out_dir`` defaults to the config's
    ``LocalPath``; ``node_id`` (names the files) to ``<rank or pid>-<host>``. With
    ``profile_after_close`` and Python profiling configured, a last profile runs from ``close()``
    to the end of the process (``posthookclose``), as smdebug's does. ``spent_seconds`` is the
    time its hooks have taken from the training so far, writing profiles included.
    """

    def __init__(
        self,
        config: ProfilingPlan | str | os.PathLike[str],
        out_dir: str | os.PathLike[str] | None = None,
        node_id: str | None = None,
        *,
        check_interval: float = 0.5,
        profile_after_close: bool = True,
    ) -> None:
        self._watch: ProfilerConfigFile[ProfilingPlan] | None = None
        if isinstance(config, ProfilingPlan):
            plan = config
        elif isinstance(config, (str, os.PathLike)):
            self._watch = ProfilerConfigFile(os.fspath(config), framework_plan, check_interval)
            plan = self._watch.read()
        else:
            raise ConfigError(
                "config", config, "a ProfilingPlan or the path of a ProfilerConfig JSON file"
            )
        directory = os.fspath(out_dir) if out_dir is not None else plan.trace_files.local_path
        if not directory:
            raise ConfigError("out_dir", out_dir, "a directory to write the profiles into")
        self.out_dir = directory
        self.node_id = default_node_id() if node_id is None else check_trace_node_id(node_id)
        self.profile_after_close = profile_after_close
        self.step = -1
        self.mode = ModeKeys.GLOBAL
        self.mode_steps = dict.fromkeys(ModeKeys, -1)
        self._spent = 0.0
        self._plan = plan
        self._schedules = Schedules.of(plan, 0, time.time())
        self._off: set[str] = set()
        self._closed = False
        self._recorder = TimelineRecorder(
            self.out_dir,
            self.node_id,
            _now_us(),
            os.getpid(),
            self._off,
            self._fail,
            self._worker_timings_wanted,
        )
        self._sessions = ProfilingSessions(self.out_dir, self.node_id, self._off, self._fail)
        self.flight_recorder: FlightRecorder | None = None
        """Captures slow steps and requested ones (``.flight_recorder``); None when disarmed."""
        self.hang_watch: StackWatch | None = None
        """Writes every thread's stacks when the training is stuck; with the flight recorder."""
        if FLIGHT_RECORDER.get():
            self.flight_recorder = FlightRecorder(self.out_dir, self.node_id, since_us=_now_us())
            self.hang_watch = StackWatch(
                self.out_dir,
                self.node_id,
                self.flight_recorder.step_in_progress,
                step_limit=HANG_SECONDS.get(),
            )
            self.hang_watch.start()
        self._optimizer_starts: dict[int, float] = {}
        self._registered: set[int] = set()
        self._recorder.configure(plan)
        self._recorder.refresh(self.active, plan)
        self._follower: TrainingFollower | None = None
        """The profiler's own step events, for the models it registered itself."""
        dataloader_patch.add_listener(self._recorder)
        if self.active and plan.python is not None:
            point = ProfilePoint("prestepzero", None, "start", _now_us())
            self._sessions.start_python(plan, point, plan.python_timer_at(-1))
        close_at_exit(self, _close_now, "the framework profiler")

    @classmethod
    def from_environment(
        cls, out_dir: str | os.PathLike[str] | None = None, node_id: str | None = None
    ) -> FrameworkProfiler | None:
        """A profiler watching this process's ProfilerConfig file, or None when there is none.

        The file is ``$TRAINPROBE_PROFILER_CONFIG``, else ``$SMPROFILER_CONFIG_PATH``, else
        SageMaker's default location; an invalid file raises ConfigErrors.
        """
        path = find_profiler_config()
        return None if path is None else cls(path, out_dir, node_id)

    @classmethod
    def for_hook(cls, *, strict: bool) -> FrameworkProfiler | None:
        """The profiler a tensor hook runs: ``from_environment``'s, or None, logged, when its
        configuration cannot be used (raised when ``strict``): training and saving go on."""
        try:
            return cls.from_environment()
        except Exception as error:
            if strict:
                raise
            log.error(
                "trainprobe: framework profiling is off for this run: its configuration cannot "
                "be used (%s: %s). Training and saving tensors go on.",
                type(error).__name__,
                error,
            )
            return None

    @property
    def plan(self) -> ProfilingPlan:
        """What is profiled and when, as last read."""
        return self._plan

    @property
    def active(self) -> bool:
        """Whether framework profiling is on now."""
        return self._plan.enabled and not self._closed and "profiler" not in self._off

    @property
    def spent_seconds(self) -> float:
        """Seconds the profiler's hooks have taken from the training (on any thread)."""
        return self._spent + self._recorder.spent_seconds

    def _fail(self, part: str, error: BaseException) -> None:
        if part in self._off:
            return
        self._off.add(part)
        log.error(
            "trainprobe: %s failed and stops for the rest of this run (%s: %s). Training "
            "continues; what was already written under %s is intact.",
            _PARTS.get(part, part),
            type(error).__name__,
            error,
            self.out_dir,
        )
        self._sessions.abandon(part)
        if part in ("flight", "profiler") and self.flight_recorder is not None:
            self.flight_recorder.abandon()
        self._recorder.recording = self._recorder.recording and part not in ("timeline", "profiler")

    def _worker_timings_wanted(self) -> bool:
        return not self._schedules.dataloader.finished(self.step + 1, time.time())

    # ----- registration, modes -----

    def register_module(self, module: torch.nn.Module) -> None:
        """Profile ``module``'s steps on its own (no tensor hook): each of its forwards starts
        one. A hook that profiles registers its models with itself instead."""
        if not isinstance(module, torch.nn.Module):
            raise ConfigError("module", module, "a torch.nn.Module")
        model = naming.unwrap(module)
        if id(model) in self._registered:
            return
        self._registered.add(id(model))
        if self._follower is None:
            self._follower = TrainingFollower(lambda: (), lambda: not self._closed)
            self._follower.subscribe(self)
        self._follower.watch(model, first=False)

    def set_mode(self, mode: ModeKeys) -> None:
        """Switch to TRAIN, EVAL, PREDICT or GLOBAL; the next step is of that mode."""
        self.mode = ModeKeys.parse(mode)
        if self._follower is not None:
            self._follower.set_mode(self.mode)

    def record_event(
        self,
        training_phase: str,
        op_name: str,
        start_time: float,
        duration: float,
        **args: Any,
    ) -> None:
        """Add an event of your own to the timeline (times in seconds since the epoch)."""
        self._recorder.emit(
            TimelineEvent(training_phase, op_name, start_time * 1e6, duration * 1e6, args)
        )

    # ----- the step events (StepListener) -----

    def step_started(self, start: StepStart) -> None:
        """A step starts (the follower counted it)."""
        started = time.perf_counter()
        try:
            self._start_step(start)
        except Exception as error:
            self._fail("profiler", error)
        self._spent += time.perf_counter() - started

    def step_continued(self, model: torch.nn.Module) -> None:
        """Another forward of the TRAIN step in progress (a micro-batch)."""
        started = time.perf_counter()
        try:
            if self._recorder.recording:
                self._recorder.timeline.forward_started(_now_us())
        except Exception as error:
            self._fail("profiler", error)
        self._spent += time.perf_counter() - started

    def forward_ended(self, model: torch.nn.Module, outputs: Any) -> None:
        """A forward of the step ended."""
        started = time.perf_counter()
        try:
            self._end_forward(outputs)
        except Exception as error:
            self._fail("profiler", error)
        self._spent += time.perf_counter() - started

    def update_starting(
        self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        """An optimizer is about to step: time it, and its closure."""
        return self._optimizer_started(optimizer, args, kwargs)

    def update_ended(self, optimizer: Any) -> None:
        """The optimizer stepped."""
        self._optimizer_ended(optimizer)

    # ----- the step -----

    def _start_step(self, start: StepStart) -> None:
        entry_us = _now_us()
        if self._watch is not None and "config" not in self._off:
            self._check_config()
        self.step, self.mode, mode_step = start.step, start.mode, start.mode_step
        self.mode_steps[start.mode] = mode_step
        model = type(start.model).__name__
        if not self.active:
            return
        step, mode, now = self.step, self.mode, entry_us / 1e6
        schedules, off = self._schedules, self._off
        python = "python" not in off and schedules.python.covers(step, now)
        detailed = "detailed" not in off and schedules.detailed.covers(step, now)
        dataloader = "dataloader" not in off and schedules.dataloader.covers(step, now)
        # The slow work of the previous step's profiling first; it belongs to no step.
        sessions, mode_name = self._sessions, mode.name.lower()
        profiled_before = sessions.running
        if profiled_before:
            sessions.finish_step(mode_name, step, entry_us, keep_detailed=detailed)
        recorder = self._recorder
        if recorder.recording:
            done = schedules.dataloader.finished(step, now)
            recorder.step_started(
                step, mode, mode_step, model, _now_us(), entry_us, dataloader, done
            )
        flight = self.flight_recorder
        if flight is not None and "flight" not in off:
            try:
                busy = detailed or python or profiled_before
                flight.step_started(step, mode_name, entry_us, busy=busy, mode_step=mode_step)
            except Exception as error:
                self._fail("flight", error)
        if detailed or python:
            sessions.begin_step(self._plan, mode_name, step, detailed, python)

    def _end_forward(self, outputs: Any) -> None:
        if not self.active:
            return
        end_us = _now_us()
        record = self._recorder.timeline.current
        if self._recorder.recording and record is not None:
            self._recorder.timeline.forward_ended(end_us)
            if torch.is_grad_enabled():
                tensor = _grad_tensor(outputs)
                if tensor is not None:
                    # A tensor that cannot take hooks (inference mode) has no backward.
                    with contextlib.suppress(RuntimeError):
                        hook = functools.partial(self._backward_started, record)
                        tensor.register_hook(hook)  # type: ignore[no-untyped-call]
        if self._sessions.python.running:
            self._sessions.forward_ended(self._plan, self.mode.name.lower(), self.step, end_us)

    def _backward_started(self, record: StepRecord, gradient: torch.Tensor) -> None:
        started = time.perf_counter()
        try:
            start_us = _now_us()

            def backward_ended() -> None:
                ended = time.perf_counter()
                try:
                    if self._recorder.recording:
                        self._recorder.timeline.backward(record, start_us, _now_us())
                except Exception as error:
                    self._fail("timeline", error)
                self._spent += time.perf_counter() - ended

            when_backward_ends(backward_ended)
        except Exception as error:
            self._fail("timeline", error)
        self._spent += time.perf_counter() - started

    def _optimizer_started(
        self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        if not self._recorder.recording:
            return None
        started = time.perf_counter()
        self._optimizer_starts[id(optimizer)] = _now_us()
        try:
            timed = self._timed_closure(optimizer, args, kwargs)
        except Exception as error:
            self._fail("timeline", error)
            timed = None
        self._spent += time.perf_counter() - started
        return timed

    def _timed_closure(
        self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        """The step's arguments with its closure (if any) replaced by one that is timed."""
        name = f"{type(optimizer).__name__}.step closure"

        def timed(closure: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(closure)
            def timed_closure(*closure_args: Any, **closure_kwargs: Any) -> Any:
                start_us = _now_us()
                try:
                    return closure(*closure_args, **closure_kwargs)
                finally:
                    self._closure_ended(name, start_us)

            return timed_closure

        return with_closure(args, kwargs, timed)

    def _closure_ended(self, name: str, start_us: float) -> None:
        started = time.perf_counter()
        try:
            if self._recorder.recording:
                self._recorder.timeline.optimizer_step(name, start_us, _now_us(), OPTIMIZER_CLOSURE)
        except Exception as error:
            self._fail("timeline", error)
        self._spent += time.perf_counter() - started

    def _optimizer_ended(self, optimizer: Any) -> None:
        started = time.perf_counter()
        start_us = self._optimizer_starts.pop(id(optimizer), None)
        if start_us is None or not self._recorder.recording:
            return
        try:
            name = f"{type(optimizer).__name__}.step"
            self._recorder.timeline.optimizer_step(name, start_us, _now_us())
        except Exception as error:
            self._fail("timeline", error)
        self._spent += time.perf_counter() - started

    # ----- configuration updates -----

    def _check_config(self) -> None:
        assert self._watch is not None
        try:
            plan = self._watch.changed()
        except Exception as error:
            self._fail("config", error)
            return
        if plan is not None:
            self._apply(plan)

    def _apply(self, plan: ProfilingPlan) -> None:
        """Profile by ``plan`` from the next step on (a live update)."""
        was_active = self.active
        if plan.trace_files.local_path != self._plan.trace_files.local_path:
            plan = replace(plan, trace_files=self._plan.trace_files)  # the output cannot move
        if was_active and not plan.enabled:
            self._stop_all("stepend")
            self._recorder.pause()
        self._plan = plan
        self._schedules = Schedules.of(plan, self.step + 1, time.time())
        self._recorder.configure(plan)
        self._recorder.refresh(self.active, plan)
        log.info(
            "trainprobe: framework profiling %s from step %d",
            "updated" if plan.enabled else "disabled",
            self.step + 1,
        )

    def _stop_all(self, phase: str) -> None:
        """End every profile in progress and write the last step (its phase is ``phase``)."""
        self._sessions.stop_all(self.mode.name.lower(), self.step, phase)
        if self.flight_recorder is not None and "flight" not in self._off:
            try:
                self.flight_recorder.finish(_now_us())
            except Exception as error:
                self._fail("flight", error)
        self._recorder.finish()

    # ----- the end -----

    def close(self) -> None:
        """Finish every profile and the timeline; the profiler stops (idempotent)."""
        self._close(at_exit=False)

    def _close(self, at_exit: bool) -> None:
        if self._closed:
            return
        active = self.active
        try:
            dataloader_patch.remove_listener(self._recorder)
            if self._follower is not None:
                self._follower.close()
            if active:
                self._stop_all("stepend")
        except Exception as error:
            self._fail("profiler", error)
        self._closed = True
        if self.hang_watch is not None:
            self.hang_watch.close()
        if self.flight_recorder is not None:
            self.flight_recorder.close()
        self._recorder.close()
        if (
            active
            and not at_exit
            and self.profile_after_close
            and self._plan.python is not None
            and "python" not in self._off
        ):
            point = ProfilePoint("posthookclose", None, "end", _now_us())
            self._sessions.start_python(self._plan, point, self._plan.python_timer_at(-1))
            if self._sessions.python.running:
                atexit.register(_stop_after_close, weakref.ref(self))

    def _stop_after_close(self) -> None:
        self._sessions.stop_python(ProfilePoint("posthookclose", None, "end", _now_us()))

    def __repr__(self) -> str:
        return (
            f"<trainprobe FrameworkProfiler out_dir={self.out_dir!r} node_id={self.node_id!r} "
            f"step={self.step} active={self.active}>"
        )


def _close_now(profiler: FrameworkProfiler) -> None:
    profiler._close(at_exit=True)


def _stop_after_close(reference: weakref.ref[FrameworkProfiler]) -> None:
    profiler = reference()
    if profiler is not None:
        profiler._stop_after_close()
