"""The PyTorch hook: saves a model's tensors by step, in smdebug's format, at little cost.

Usage is smdebug's::

    hook = Hook(out_dir, save_config=SaveConfig(save_interval=100))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for batch in data:            # each forward of the model is one step (the first is step 0)
        ...
    hook.close()

Steps: each forward of a registered module starts a step; the global step counts every step and
each mode (``set_mode``) counts its own. Eval forwards advance the global step too. Gradients are
saved only in TRAIN (and GLOBAL) mode.

Cost: when a step starts, the hook decides once which collections are due. The modules and
gradients are hooked only for the steps that save them: a step that saves nothing costs the step's
start and end and the non-finite guard's check (a few fused operations whatever the model's
size). On a save step it copies: reductions are computed on the tensors' device, batched over the
tensors captured together, and gathered into one buffer read back once at the end of the step;
raw tensors are snapshotted and copied to the host asynchronously; a writer thread does the
encoding and file I/O. ``hook.overhead`` reports its time per step and the bytes written;
every worker that writes saves it in ``<out_dir>/hook-overhead/<worker>.json`` (on the writer
thread, at a step boundary at most once a minute, and at ``close()``) for the report.

TensorBoard: with ``export_tensorboard=True`` (into ``<out_dir>/tensorboard``) or a
``tensorboard_dir``, rank 0 also writes what it saves as TensorBoard summaries, on the writer
thread: tensors of scalar collections (losses, metrics), reductions and ``save_scalar`` values as
scalars; other tensors whose collection has ``save_histogram`` as histograms tagged
``<collection>/<tensor>``, from the raw value (copied to the host for that even when only
reductions are saved, which is the export's one cost on the training thread).

Parts: the ``Hook`` is smdebug's surface and the step's lifecycle; its collaborators are the
training follower (``training_follower``: where steps start and end, the one source of step
events, which the framework profiler hears too), the saved modules (``module_saving``), the
in-training checks (``in_training_checks``: the non-finite guard, the spike rules) and the side
records (``side_records``: module types, the NaN's origin, spikes, overhead).

Failures: an error inside the hook (a full disk, an unwritable directory, a tensor it cannot
encode) is logged once, saving stops, and the training goes on; files already written stay
intact. The same holds for what the hook reads while the training runs: a configuration file it
cannot use (``create_from_json_file``: the hook saves nothing), a ProfilerConfig it cannot use
(no framework profiling), a stop request that is not valid (ignored). With ``strict=True`` (or
``TRAINPROBE_STRICT=1``) the error is raised instead.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import numpy as np
import torch

from trainprobe import settings
from trainprobe.capture.at_exit import close_at_exit
from trainprobe.capture.collections import CollectionAccess, CollectionSet
from trainprobe.capture.hook_arguments import (
    check_include_workers,
    output_directory,
    tensorboard_directory,
)
from trainprobe.capture.hook_config_file import DEFAULT_OUT_DIR, read_hook_config
from trainprobe.capture.overhead import HookOverhead, device_wait_seconds
from trainprobe.capture.pytorch import naming
from trainprobe.capture.pytorch.functional_activations import FUNCTION_TYPES
from trainprobe.capture.pytorch.hook_state import HookState
from trainprobe.capture.pytorch.in_training_checks import InTrainingChecks
from trainprobe.capture.pytorch.module_hooks import ModuleHookHandle, attach_forward_hook
from trainprobe.capture.pytorch.module_saving import ModuleSaving
from trainprobe.capture.pytorch.module_types import ModuleTypes
from trainprobe.capture.pytorch.nonfinite_guard import NonFiniteGuard
from trainprobe.capture.pytorch.profiling import FrameworkProfiler
from trainprobe.capture.pytorch.side_records import SideRecords
from trainprobe.capture.pytorch.smdebug_surface import SmdebugSurface
from trainprobe.capture.pytorch.step_capture import StepCapture
from trainprobe.capture.pytorch.training_follower import (
    GuardedListener,
    StepListener,
    StepStart,
    TrainingFollower,
)
from trainprobe.capture.pytorch.training_losses import LossSource
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.capture.save_plan import SavePlan
from trainprobe.capture.stop_request import StopRequestWatch, TrainingStopRequested
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys

__all__ = ["Hook", "HookState", "del_hook", "get_hook", "set_hook"]

log = logging.getLogger("trainprobe")

OVERHEAD_WRITE_SECONDS = 60.0
"""The overhead file is rewritten at the first step boundary after this many seconds."""

_P = ParamSpec("_P")
_R = TypeVar("_R")

_singleton: Hook | None = None


def get_hook(
    create_if_not_exists: bool = False, json_config_path: str | None = None
) -> Hook | None:
    """The hook of this process: the last one created, or one made from the configuration file.

    With ``create_if_not_exists`` and no hook yet, a hook is created from the hook configuration
    file (see ``Hook.create_from_json_file``) when there is one; otherwise None. As on
    SageMaker, ``$USE_SMDEBUG`` set to no (``0``, ``false``...) turns that off: no hook is
    created, and only a hook the script constructed itself is returned.
    """
    if _singleton is None and create_if_not_exists and settings.USE_SMDEBUG.get():
        try:
            Hook.create_from_json_file(json_config_path)
        except FileNotFoundError:
            return None
    return _singleton


def set_hook(hook: Hook) -> None:
    """Make ``hook`` the hook ``get_hook()`` returns."""
    global _singleton
    if not isinstance(hook, Hook):
        raise ConfigError("hook", hook, "a trainprobe.pytorch.Hook")
    _singleton = hook


def del_hook() -> None:
    """Forget the hook of this process: ``get_hook()`` returns None (or makes a new one)."""
    global _singleton
    _singleton = None


def _strict_from_environment() -> bool:
    return settings.STRICT.get()


def _advice(error: BaseException) -> str:
    if isinstance(error, OSError):
        return "Check that the output directory is writable and has free space."
    if isinstance(error, TypeError):
        return "A tensor could not be encoded; leave it out of the saved collections."
    return "This looks like a trainprobe bug; please report it with this message."


def _guarded(method: Callable[_P, _R]) -> Callable[_P, _R | None]:
    """Time a hook entry point and keep its failures out of the training (unless strict).

    A wait for the device inside it is counted apart, against the step the entry's time goes to
    (the one current when it returns): the device was running the training's work meanwhile.
    A rule's request to stop the training goes through: it must reach the training."""

    @functools.wraps(method)
    def entry(*args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        hook = args[0]
        assert isinstance(hook, Hook)
        if hook.state is HookState.FAILED:
            return None
        outermost = hook._depth == 0
        hook._depth += 1
        waited = device_wait_seconds()
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        except TrainingStopRequested:
            raise
        except Exception as error:
            hook._fail(error)
            return None
        finally:
            hook._depth -= 1
            if outermost:
                _account(hook, started, waited)

    return entry


def _account(hook: Hook, started: float, waited: float) -> None:
    """Count the time since ``started`` as ``hook``'s own, less any wait for the device since
    ``waited`` (counted apart, against the current step)."""
    elapsed = time.perf_counter() - started
    waiting = device_wait_seconds() - waited
    hook._spent += elapsed - waiting
    if waiting:
        hook.overhead.add_device_wait(hook.step, waiting)


class Hook(SmdebugSurface, CollectionAccess, StepListener):
    """Saves the tensors of PyTorch modules by step into ``out_dir``, smdebug's format.

    ``save_config`` says when (default: every 500 steps), ``reduction_config`` what (default: the
    raw tensors), ``include_collections`` which collections (``losses`` always), ``include_regex``
    adds tensors by name to the ``default`` collection, ``save_all`` saves every tensor.
    ``include_workers`` is ``"one"`` (only rank 0 writes) or ``"all"`` (every rank writes its own
    files). ``dry_run`` only logs what would be saved. ``export_tensorboard`` writes TensorBoard
    summaries of the saved tensors into ``tensorboard_dir`` (default ``<out_dir>/tensorboard``);
    giving a ``tensorboard_dir`` turns the export on by itself, as in smdebug.
    ``nonfinite_guard`` (on by default, off for a compiled model) checks every step for the
    first NaN or infinity, records where it started and saves that step in full (see
    ``trainprobe.capture.pytorch.nonfinite_guard``).

    ``follow_training`` (off by default, as in smdebug; on for the hook ``trainprobe run``
    installs) reads steps, modes and losses from the training itself: a TRAIN step is one update
    (``optimizer.step()``), however many forwards it took; the mode comes from ``model.training``
    and the grad mode; the loss is found wherever the training computes it (see
    ``trainprobe.capture.pytorch.training_follower``).

    ``training_rules`` are the rules the hook runs inside the training, on every step: the
    ``LossSpike`` and ``GradientNormSpike`` rules among them (``Rule`` objects or their
    configuration dictionaries), whose actions (skip the update, roll back, stop) take effect
    before the spiking update (see ``trainprobe.capture.pytorch.spike_guard``).

    ``record_every_step`` (on by default) keeps every TRAIN step's loss, learning rate and
    gradient norm whatever ``save_config`` says (``update_record``), which the trial reads as
    ``trainprobe/loss``, ``trainprobe/learning_rate`` and ``trainprobe/gradient_norm``.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | None = None,
        export_tensorboard: bool = False,
        tensorboard_dir: str | os.PathLike[str] | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | SaveConfigMode | dict[Any, Any] | None = None,
        include_regex: Sequence[str] | str | None = None,
        include_collections: Sequence[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        *,
        strict: bool | None = None,
        nonfinite_guard: bool = True,
        follow_training: bool = False,
        training_rules: Sequence[Any] | None = None,
        record_every_step: bool = True,
    ) -> None:
        global _singleton
        super().__init__()
        self.out_dir = output_directory(out_dir)
        self.stop_watch = StopRequestWatch(self.out_dir)
        check_include_workers(include_workers)
        if reduction_config is not None and not isinstance(reduction_config, ReductionConfig):
            raise ConfigError("reduction_config", reduction_config, "a ReductionConfig or None")
        self.strict = _strict_from_environment() if strict is None else bool(strict)
        self.dry_run = bool(dry_run)
        self.save_all = bool(save_all)
        self.include_workers = include_workers
        self.tensorboard_dir = tensorboard_directory(
            export_tensorboard, tensorboard_dir, self.out_dir
        )
        self.export_tensorboard = self.tensorboard_dir is not None
        self.save_config = SaveConfig.parse(save_config)
        self.reduction_config = reduction_config or ReductionConfig(save_raw_tensor=True)
        self.collections = CollectionSet()
        included = self.collections.select(include_collections, include_regex, self.save_all)
        self.plan = SavePlan(self.collections, included, self.save_config, self.reduction_config)
        self.state = HookState.WAITING
        self._capture = StepCapture(
            self.plan,
            self.out_dir,
            include_workers,
            self.collections.to_json_dict,
            self._on_writer_error,
            self.tensorboard_dir,
        )
        self._spent = 0.0
        self._depth = 0
        # Values handed in while no saved step is open, for the next one (smdebug's caches).
        self._pending_scalars: dict[str, tuple[object, float | None]] = {}
        self._pending_tensors: dict[str, tuple[torch.Tensor, list[str]]] = {}
        self._models: list[torch.nn.Module] = []
        self._handles: list[ModuleHookHandle] = []
        self.module_types = ModuleTypes()
        self.overhead = HookOverhead(
            _bytes=self._capture.bytes_written, blocked_seconds=self._capture.blocked_seconds
        )
        self.records = SideRecords(
            self.out_dir, self._capture, self.overhead, self.module_types, OVERHEAD_WRITE_SECONDS
        )
        self.modules = ModuleSaving(
            self.plan,
            self._capture,
            self,
            self.module_types,
            replaying=lambda: self.checks.replaying,
            gradients_due=lambda: (
                self.follower.mode is ModeKeys.TRAIN and self.follower.updates_by_hand()
            ),
        )
        self.follower = TrainingFollower(
            lambda: [id(p) for ps in self.modules.registered.values() for _, p in ps],
            lambda: (
                self.state in (HookState.WAITING, HookState.SAVING) and not self.checks.replaying
            ),
        )
        recording = bool(record_every_step)
        self.checks = self._in_training_checks(nonfinite_guard, training_rules or [], recording)
        # Framework profiling rides along when a ProfilerConfig file is given
        # ($TRAINPROBE_PROFILER_CONFIG or smdebug's $SMPROFILER_CONFIG_PATH). It hears the step
        # events first, so that each step's timing includes the hook's own work.
        self.profiler = FrameworkProfiler.for_hook(strict=self.strict)
        for listener in (self.profiler, self, GuardedListener(self._run, self.modules)):
            if listener is not None:
                self.follower.subscribe(listener)
        self.follower.subscribe(GuardedListener(self._run, self.checks))
        if follow_training:
            self.start_following_training()
        _singleton = self
        close_at_exit(self, lambda hook: hook.close(), "the hook")

    # ----- construction from the SageMaker configuration file -----

    @classmethod
    def create_from_json_file(cls, path: str | None = None) -> Hook:
        """A hook configured by a ``DebugHookConfig`` JSON file.

        The file is ``path``, else ``$TRAINPROBE_HOOK_CONFIG``, else ``$SMDEBUG_CONFIG_FILE_PATH``,
        else SageMaker's default location; FileNotFoundError when there is none. TensorBoard
        export is on when its hook parameters say so (``export_tensorboard``,
        ``tensorboard_dir``) or when SageMaker's TensorBoard output file is present
        (``$TENSORBOARD_CONFIG_FILE_PATH``; its ``LocalPath`` is the directory).

        A file that is there but cannot be used (not JSON, a bad value, a ``LocalPath`` with a
        NUL) does not stop the training: the error is logged once and the hook returned saves
        nothing. With ``TRAINPROBE_STRICT=1`` the error is raised.
        """
        try:
            arguments = read_hook_config(path)
            hook = cls(**arguments.hook_kwargs(), training_rules=arguments.training_rules)
        except FileNotFoundError:
            raise
        except Exception as error:
            if _strict_from_environment():
                raise
            log.error(
                "trainprobe: the hook configuration cannot be used (%s: %s); the training goes "
                "on without saving tensors. Set %s=1 to stop the training on such errors "
                "instead.",
                type(error).__name__,
                error,
                settings.STRICT.name,
            )
            hook = cls(DEFAULT_OUT_DIR, dry_run=True, strict=False)  # it saves nothing
            hook.state = HookState.FAILED
            return hook
        try:
            for collection_settings in arguments.collections:
                collection_settings.apply(hook.collections)
        except Exception as error:
            hook._fail(error)
        return hook

    # ----- the hook's state and step -----

    def _in_training_checks(self, guard: bool, rules: Any, record: bool) -> InTrainingChecks:
        """The hook's in-training checks, unless a dry run: the non-finite guard (``guard``),
        the in-training spike rules among ``rules`` and the training record (``record``)."""
        follower, modules, capture = self.follower, self.modules, self._capture
        checks = InTrainingChecks(
            NonFiniteGuard(
                modules.names,
                modules.top_names,
                lambda: self._models,
                self._save_found_step,
                modules.save_io,
            )
            if guard and not self.dry_run
            else None,
            strict=self.strict,
            records=None if self.dry_run else self.records,
            where=lambda: (
                follower.step,
                follower.mode,
                follower.mode_step,
                capture.resolve_worker().name,
            ),
            step_loss=follower.losses.peek,
            run=self._run,
            flush=capture.flush,
            owns=follower.owns,
            hand_over=capture.record if record and not self.dry_run else None,
            by_hand=follower.updates_by_hand,
            parameters=lambda: [parameter for _, parameter in modules.parameters],
        )
        checks.arm_spikes(rules, self.out_dir, lambda: self._models)
        return checks

    @property
    def _active(self) -> bool:
        """Whether the step in progress saves tensors."""
        return self.state is HookState.SAVING

    @_guarded
    def _run(self, action: Callable[..., _R], *args: Any) -> _R:
        """``action(*args)`` as an entry point of the hook (timed, failures contained)."""
        return action(*args)

    @property
    def step(self) -> int:
        """The global step in progress (-1 before the first)."""
        return self.follower.step

    @property
    def mode(self) -> ModeKeys:
        """The mode of the step in progress (or of the next, after ``set_mode``)."""
        return self.follower.mode

    @property
    def mode_steps(self) -> dict[ModeKeys, int]:
        """The step in progress within each mode."""
        return self.follower.mode_steps

    @property
    def follow_training(self) -> bool:
        """Whether steps, modes and losses are read from the training."""
        return self.follower.following

    @property
    def worker(self) -> str | None:
        """This process's worker name (``worker_<rank>``), once known."""
        worker = self._capture.worker
        return worker.name if worker is not None else None

    def _worker_name(self) -> str:
        return self._capture.resolve_worker().name

    # ----- registration -----

    def register_module(self, module: torch.nn.Module) -> None:
        """Save this module's parameters, gradients and module outputs; its forward is a step."""
        if not isinstance(module, torch.nn.Module):
            raise ConfigError("module", module, "a torch.nn.Module")
        model = naming.unwrap(module)
        if model is not module and getattr(module, "_orig_mod", None) is not None:
            # A compiled model: a check in every module on every step would break its graph.
            self.checks.guard = None
            self.modules.functional_owner = ""  # nor are its activation functions watched
        if id(model) in self.modules.registered:
            log.warning("trainprobe: %s is already registered; ignored", type(model).__name__)
            return
        top = naming.model_class(model).__name__
        self.modules.top_names[id(model)] = top
        self._models.append(model)
        # Following the training, the step's mode is decided before any other pre-hook runs.
        self.follower.watch(model, first=self.follow_training)
        parameters = [
            (naming.parameter_name(top, naming.clean_name(name)), parameter)
            for name, parameter in model.named_parameters()
        ]
        saved_names = {id(parameter): name for name, parameter in parameters}
        for qualified, submodule in model.named_modules():
            if id(submodule) in self.modules.names:
                continue
            if naming.is_wrapping_level(submodule):
                continue  # its module, inside, carries the name
            name = naming.clean_name(qualified) or top
            self.module_maps[submodule] = name
            setattr(submodule, "_module_name", name)  # noqa: B010 (smdebug's name for subclasses)
            self.module_types.add(name, submodule)
            guard = self.checks.guard
            if guard is not None:
                own = [
                    (saved_names[id(parameter)], parameter)
                    for parameter in submodule.parameters(recurse=False)
                ]
                guard.register(name, submodule, own)
            # A subclass's forward_hook (smdebug's extension point) replaces the hook's own and
            # sees every forward.
            overridden = self._overrides_forward_hook()
            if overridden:
                self._handles.append(attach_forward_hook(submodule, self.forward_hook))
            self.modules.add_module(submodule, name, hooked=not overridden)
        self.modules.add_parameters(model, parameters)

    register_hook = register_module

    def register_loss(self, loss_module: torch.nn.Module) -> None:
        """Save a loss module's output as ``<LossClass>_output_0`` (the ``losses`` collection)."""
        if not isinstance(loss_module, torch.nn.Module):
            raise ConfigError("loss_module", loss_module, "a torch.nn.Module (a loss)")
        if id(loss_module) in self.modules.names:
            return
        name = type(loss_module).__name__
        self.modules.add_module(loss_module, name, hooked=False)
        self.module_maps[loss_module] = name
        setattr(loss_module, "_module_name", name)  # noqa: B010
        self.modules.losses.add(name)
        self.module_types.add(name, loss_module)
        if self._overrides_forward_hook():
            hook = self.forward_hook
        else:  # for the guard and the spike rules
            hook = self.modules.module_hook(name, always=True)
        self._handles.append(attach_forward_hook(loss_module, hook))

    def start_following_training(self) -> None:
        """Read steps, modes and losses from the training from now on (``follow_training``).

        The process has one watch of its losses: the hook that called this last hears them."""
        self.follower.start_following()

    # ----- modes (the collections calls are CollectionAccess's) -----

    def set_mode(self, mode: ModeKeys) -> None:
        """Switch to TRAIN, EVAL, PREDICT or GLOBAL; the next forward starts a step of that mode."""
        self.follower.set_mode(ModeKeys.parse(mode))

    # ----- the step's lifecycle (its events, from the training follower) -----

    @_guarded
    def step_ended(self, *, at_update: bool) -> None:
        """The step in progress ends (``at_update``: at its update, whose gradients are saved,
        summed over its micro-batches, unless a backward's end saved them)."""
        if self.state is HookState.CLOSED:
            return
        if at_update:
            if self._active and not self.modules.gradients_saved:
                self.modules.save_gradients(self.modules.parameters)
        else:
            self.modules.functional.stop()  # a forward that raised never reached its end
            self._raise_writer_error_if_strict()
        self._finish_step()

    @_guarded
    def step_started(self, start: StepStart) -> None:
        """A step starts: decide what it saves, and hook what that needs."""
        if self.state is HookState.CLOSED:
            return
        self.modules.prepare_if_changed(self.collections, self.module_types, strict=self.strict)
        if not self._capture.writes:
            self.checks.stop_guarding()
            return  # another rank writes (include_workers="one")
        self.checks.begin_step(start.step, start.mode, start.mode_step)
        due = self.plan.due(start.mode, start.mode_step)
        if self.dry_run:
            if due:
                names = ", ".join(c.name for c in self.plan.collections_in(due))
                log.info("trainprobe dry run: step %d would save %s", start.step, names)
            return
        self.records.overhead_if_due(OVERHEAD_WRITE_SECONDS)
        self.records.module_types_if_new()
        self._capture.begin(start.step, start.mode, start.mode_step, due)
        self.state = self.state.step_begun(bool(due))
        if due:
            self.modules.hook_for(due, gradients=not self.follow_training)
            self._save_pending()
            self._capture.capture(self.modules.registered.get(id(start.model), []), parameters=True)
            self.modules.watch_functions(id(start.model))
        else:
            self.modules.unhook()
        if self.checks.step_begun(saved=bool(due)):
            self._save_rest_in_full()

    def forward_starting(
        self, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """A forward starts: a rule's stop request stops the training here (outside the error
        guard: it must reach the training)."""
        self.stop_watch.raise_if_requested(self.step)

    def _finish_step(self) -> None:
        losses = self.follower.take_losses()
        if self.follow_training:
            # A hook that does not follow the training saves its losses as they come.
            for name, loss in losses:
                self._capture.capture_named(name, naming.OUTPUT_SUFFIX, loss)
        self.state = self.state.step_begun(False)
        self.checks.end_step(losses[0][1] if losses else None)
        finished = self._capture.finish()
        if finished is not None:
            self.overhead.add(finished.step, self._spent)
            self._spent = 0.0

    def _save_rest_in_full(self) -> None:
        """The step has gone non-finite: save the rest of it raw, and every parameter."""
        self.state = self.state.step_begun(True)
        self.modules.save_in_full(gradients=not self.follow_training)

    def _save_found_step(self, losses: list[tuple[str, torch.Tensor]]) -> None:
        """The guard found the open step non-finite: save the rest of it in full, with its
        non-finite losses and its gradients (read at the update when following the training)."""
        self._save_rest_in_full()
        if self.follow_training:
            return
        for name, loss in losses:
            self._capture.capture_named(name, naming.OUTPUT_SUFFIX, loss)
        self.modules.save_gradients(self.modules.parameters)

    def _save_pending(self) -> None:
        scalars, self._pending_scalars = self._pending_scalars, {}
        for name, (value, timestamp) in scalars.items():
            self._capture.add_scalar(name, value, timestamp)
        tensors, self._pending_tensors = self._pending_tensors, {}
        for name, (tensor, collections) in tensors.items():
            self._save_tensor(name, tensor, collections)

    # ----- what the modules' hooks hand in -----

    @_guarded
    def _on_module_io(self, name: str, inputs: Any, outputs: Any) -> None:
        """A hooked module's forward returned (a loss module's at every step)."""
        is_loss = name in self.modules.losses
        if is_loss and self.follow_training:
            return  # the step's losses are checked and saved at its end
        if is_loss and isinstance(outputs, torch.Tensor):
            if self.checks.hears_losses:  # for the spike rules and the training record
                self.follower.losses.add(LossSource.MODULE, name, outputs)
            self.checks.loss_heard(LossSource.MODULE, name, outputs, None)
        if self._active and not self.follower.continuing:
            self.modules.save_io(name, inputs, outputs)

    @_guarded
    def _on_function(self, kind: str, inputs: Any, outputs: Any) -> None:
        """An activation function was called in the forward of a save step."""
        owner = self.modules.functional_owner
        if not self._active or owner is None or self.follower.continuing:
            return
        name = f"{owner}.{kind}"
        if name not in self.module_types.modules:
            self.module_types.modules[name] = FUNCTION_TYPES[kind]
            self.module_types.unwritten = True
        self.modules.save_io(name, inputs, outputs)

    @_guarded
    def _on_gradient(self, name: str, grad: torch.Tensor) -> None:
        """A gradient handed in by smdebug's ``backward_hook`` (a subclass's tensor hook)."""
        if self._active:
            self._capture.capture([(name, grad)])

    @_guarded
    def _save_named(self, name: str, suffix: str, value: Any) -> None:
        self._capture.capture_named(name, suffix, value)

    # ----- values the training script passes in -----

    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """Save a tensor computed outside modules (a functional loss) as ``<name>_output_<i>``."""
        if not isinstance(tensor_value, torch.Tensor):
            raise ConfigError("tensor_value", tensor_value, "a torch.Tensor")
        if self._active:
            self._save_named(tensor_name, naming.OUTPUT_SUFFIX, tensor_value)

    def save_tensor(
        self,
        tensor_name: str,
        tensor_value: object,
        collections_to_write: str | Sequence[str] = "default",
    ) -> None:
        """Add ``tensor_name`` to collections and save its value now if any of them is due."""
        names = (
            [collections_to_write]
            if isinstance(collections_to_write, str)
            else list(collections_to_write)
        )
        if not isinstance(tensor_value, torch.Tensor):
            try:
                tensor_value = torch.as_tensor(np.asarray(tensor_value))
            except (TypeError, ValueError, RuntimeError):
                raise ConfigError("tensor_value", tensor_value, "a tensor or array") from None
        self._save_tensor(tensor_name, tensor_value, names)

    @_guarded
    def _save_tensor(self, tensor_name: str, tensor: torch.Tensor, names: list[str]) -> None:
        for collection_name in names:
            self.collections.get(collection_name).add_tensor_name(tensor_name)
            self.plan.include(collection_name)
        self.plan.forget(tensor_name)
        current = self._capture.current
        if current is not None and self.plan.is_stale():
            self.modules.prepare_if_changed(self.collections, self.module_types, strict=self.strict)
            current.due = self.plan.due(current.mode, current.mode_step)
            self.state = self.state.step_begun(bool(current.due))
        if not self._active:
            # As smdebug: kept for the next step that saves anything (step 0 before the first).
            self._pending_tensors[tensor_name] = (tensor, names)
            return
        self._capture.capture([(tensor_name, tensor)])

    def save_scalar(
        self, name: str, value: object, sm_metric: bool = False, timestamp: float | None = None
    ) -> None:
        """Save a scalar as ``scalar/<name>``, as smdebug does: in the current step when it is
        saved, else in the next step that is (the latest value of each name), else in the last
        step at ``close()``.

        ``timestamp`` (seconds since the epoch) is the value's time, default now. ``sm_metric``
        is accepted for compatibility (there is no SageMaker Metrics here).
        """
        if isinstance(value, torch.Tensor) and value.numel() != 1:
            raise ConfigError("value", tuple(value.shape), "a single number")
        if not isinstance(value, (torch.Tensor, int, float, np.number, np.ndarray)):
            raise ConfigError("value", value, "a number")
        full_name = naming.SCALAR_PREFIX + name
        if not self._active:
            self._pending_scalars.pop(full_name, None)
            self._pending_scalars[full_name] = (value, timestamp)
            return
        self._run(self._capture.add_scalar, full_name, value, timestamp)

    # ----- failures -----

    def _fail(self, error: BaseException) -> None:
        if self.strict:
            raise error
        if self.state is HookState.FAILED:
            return
        if self.state is not HookState.CLOSED:
            self.state = HookState.FAILED
        log.error(
            "trainprobe: saving tensors failed and stops for the rest of this run (%s: %s). "
            "Training continues; what was already saved under %s is intact. %s "
            "Pass strict=True to the hook or set %s=1 to stop the training on such errors.",
            type(error).__name__,
            error,
            self.out_dir,
            _advice(error),
            settings.STRICT.name,
        )

    def _on_writer_error(self, error: BaseException) -> None:
        # On the writer thread: say where and why saving stopped in the overhead file at once,
        # for the job's runner, its report and its rules.
        writer = self._capture.ensure_writer()
        self.overhead.saving_stopped(writer.failed_step, error)
        self.records.overhead_file.write(self._worker_name())
        if self.strict:
            return  # raised on the training thread at the next step
        self._fail(error)

    def _raise_writer_error_if_strict(self) -> None:
        error = self._capture.error
        if self.strict and error is not None:
            raise error

    # ----- the end -----

    def flush(self) -> None:
        """Wait until everything handed to the writer so far is on disk (the step stays open)."""
        self._capture.flush()

    def close(self) -> None:
        """Finish the last step, write the collections file and ``training_job_end.ts``."""
        if self.state is HookState.CLOSED:
            return
        failed = self.state is HookState.FAILED
        self.modules.functional.stop()
        self.follower.close()
        if self.profiler is not None:
            self.follower.unsubscribe(self.profiler)
        self.checks.stop()
        if self.profiler is not None:
            try:
                self.profiler.close()
            except Exception:
                log.warning("trainprobe: closing the framework profiler failed", exc_info=True)
        try:
            if not failed:
                if self._capture.current is not None and self._capture.writes:
                    self._save_pending()  # smdebug writes what it still holds into the last step
                self._finish_step()
                if not self.dry_run and self._capture.writes:
                    if self.step >= 0:
                        self.records.module_types_if_new()
                    self.checks.close()
        except Exception as error:
            self._fail(error)
        self.state = HookState.CLOSED
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.modules.unhook()
        if self.dry_run or not self._capture.writes:
            return
        try:
            worker = self._capture.resolve_worker()
            self._capture.close(training_end=worker.is_chief)
            self.records.final_overhead()  # the writer thread has stopped: its count is final
        except Exception as error:
            self._fail(error)
        self._raise_writer_error_if_strict()

    def __repr__(self) -> str:
        return (
            f"<trainprobe.pytorch.Hook out_dir={self.out_dir!r} step={self.step} "
            f"mode={self.mode.name} collections={[c.name for c in self.plan.saved]}>"
        )
