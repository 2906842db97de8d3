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
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from trainprobe import settings
from trainprobe.capture.at_exit import close_at_exit
from trainprobe.capture.collections import Collection, CollectionSet
from trainprobe.capture.hook_arguments import (
    check_include_workers,
    output_directory,
    tensorboard_directory,
)
from trainprobe.capture.hook_config_file import DEFAULT_OUT_DIR, read_hook_config
from trainprobe.capture.overhead import HookOverhead, OverheadFile, device_wait_seconds
from trainprobe.capture.pytorch import naming
from trainprobe.capture.pytorch.functional_activations import (
    FUNCTION_TYPES,
    FunctionalActivations,
)
from trainprobe.capture.pytorch.lightning_losses import LightningLosses
from trainprobe.capture.pytorch.module_hooks import attach_forward_hook, attach_forward_pre_hook
from trainprobe.capture.pytorch.module_types import ModuleTypes
from trainprobe.capture.pytorch.nonfinite_guard import NonFiniteGuard
from trainprobe.capture.pytorch.profiling import FrameworkProfiler
from trainprobe.capture.pytorch.smdebug_surface import SmdebugSurface
from trainprobe.capture.pytorch.spike_guard import SpikeGuard, spike_rules
from trainprobe.capture.pytorch.step_capture import StepCapture
from trainprobe.capture.pytorch.training_losses import (
    LOSS_NAME,
    LossSource,
    StepLosses,
    loss_watch,
    output_loss,
)
from trainprobe.capture.pytorch.training_steps import (
    mode_of,
    optimizer_created,
    optimizer_steps,
    when_backward_ends,
    with_closure,
)
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.capture.save_plan import SavePlan
from trainprobe.capture.stop_request import StopRequestWatch, TrainingStopRequested
from trainprobe.capture.writer_thread import SideJob
from trainprobe.config.errors import ConfigError
from trainprobe.config.rules import Rule
from trainprobe.config.training_rules import training_rules
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.module_types_file import write_module_types
from trainprobe.storage.nonfinite_file import write_nonfinite_origin
from trainprobe.storage.spike_records import SpikeRecord, write_spikes

__all__ = ["Hook", "del_hook", "get_hook", "set_hook"]

log = logging.getLogger("trainprobe")

# The overhead file is rewritten at the first step boundary after this many seconds.
OVERHEAD_WRITE_SECONDS = 60.0

# The due collections of a step saved in full (after a non-finite value): every bit set.
SAVE_EVERYTHING = -1

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
    (the one current when it returns): the device was running the training's work meanwhile."""

    @functools.wraps(method)
    def entry(*args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        hook = args[0]
        assert isinstance(hook, Hook)
        if hook._failed:
            return None
        outermost = hook._depth == 0
        hook._depth += 1
        waited = device_wait_seconds()
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        except Exception as error:
            hook._fail(error)
            return None
        finally:
            hook._depth -= 1
            if outermost:
                hook._account(started, waited)

    return entry


class Hook(SmdebugSurface):
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
    ``trainprobe.capture.pytorch.training_steps`` and ``training_losses``).

    ``training_rules`` are the rules the hook runs inside the training, on every step: the
    ``LossSpike`` and ``GradientNormSpike`` rules among them (``Rule`` objects or their
    configuration dictionaries), whose actions (skip the update, roll back, stop) take effect
    before the spiking update (see ``trainprobe.capture.pytorch.spike_guard``).
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

        self.step = -1
        self.mode = ModeKeys.GLOBAL
        self.mode_steps = dict.fromkeys(ModeKeys, -1)
        self._capture = StepCapture(
            self.plan,
            self.out_dir,
            include_workers,
            self.collections.to_json_dict,
            self._on_writer_error,
            self.tensorboard_dir,
        )
        self._active = False
        self._top_names: dict[int, str] = {}
        self._losses: set[str] = set()
        self._functional = FunctionalActivations(self._on_function)
        self._functional_owner: str | None = None
        self._failed = False
        self._closed = False
        self._spent = 0.0
        self._depth = 0
        # Values handed in while no saved step is open, for the next one (smdebug's caches).
        self._pending_scalars: dict[str, tuple[object, float | None]] = {}
        self._pending_tensors: dict[str, tuple[torch.Tensor, list[str]]] = {}
        self._registered: dict[int, list[tuple[str, torch.nn.Parameter]]] = {}
        self._module_names: dict[int, str] = {}
        # Modules saved by their forward hooks, hooked only in the steps that save them.
        self._saved_modules: list[tuple[torch.nn.Module, str]] = []
        self._saved_parameters: list[tuple[str, torch.nn.Parameter]] = []
        self._save_handles: list[Any] = []
        # The due collections the modules are hooked for (0: none; None: for an older plan).
        self._hooked_for: int | None = 0
        self._functions_saved = False
        self._backward_gradients: list[tuple[str, torch.nn.Parameter]] = []
        self._models: list[torch.nn.Module] = []
        self.guard = (
            NonFiniteGuard(
                self._module_names,
                self._top_names,
                lambda: self._models,
                self._save_found_step,
                self._save_io,
            )
            if nonfinite_guard and not self.dry_run
            else None
        )
        self._guarding = False
        self._replaying = False
        self.module_types = ModuleTypes()
        self._resolved_modules: set[tuple[int, int]] = set()
        self._names_resolved = -1
        self._handles: list[Any] = []
        self.overhead = HookOverhead(
            _bytes=self._capture.bytes_written, blocked_seconds=self._capture.blocked_seconds
        )
        self._overhead_file = OverheadFile(self.out_dir, self.overhead)
        self._overhead_due_at = time.monotonic() + OVERHEAD_WRITE_SECONDS
        # Framework profiling rides along when a ProfilerConfig file is given
        # ($TRAINPROBE_PROFILER_CONFIG or smdebug's $SMPROFILER_CONFIG_PATH).
        self.profiler = self._framework_profiler()
        self.follow_training = False
        self._step_losses = StepLosses()
        self._lightning = LightningLosses(self._on_step_result)
        self._lightning_models: set[int] = set()
        self._train_step_open = False
        self._repeat_forward = False
        self._backward_in_step = False
        self._gradients_saved = False
        self._by_hand: bool | None = None
        self._optimizers: dict[int, bool] = {}
        self._spikes_announced = False
        self.spikes = self._spike_guard(training_rules or [])
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
            return cls._turned_off(error)
        try:
            for collection_settings in arguments.collections:
                collection_settings.apply(hook.collections)
        except Exception as error:
            hook._fail(error)
        return hook

    @classmethod
    def _turned_off(cls, error: Exception) -> Hook:
        """A hook that saves nothing, standing in for one whose configuration is unusable."""
        log.error(
            "trainprobe: the hook configuration cannot be used (%s: %s); the training goes on "
            "without saving tensors. Set %s=1 to stop the training on such errors instead.",
            type(error).__name__,
            error,
            settings.STRICT.name,
        )
        hook = cls(DEFAULT_OUT_DIR, dry_run=True, strict=False)
        hook._failed = True
        return hook

    def _framework_profiler(self) -> FrameworkProfiler | None:
        """The framework profiler a ProfilerConfig file asks for; None (logged) if unusable."""
        try:
            return FrameworkProfiler.from_environment()
        except Exception as error:
            if self.strict:
                raise
            log.error(
                "trainprobe: framework profiling is off for this run: its configuration cannot "
                "be used (%s: %s). Training and saving tensors go on.",
                type(error).__name__,
                error,
            )
            return None

    def _spike_guard(self, rules: Sequence[Any]) -> SpikeGuard | None:
        """The guard running the in-training spike rules among ``rules``, if there are any."""
        objects = [rule for rule in rules if isinstance(rule, Rule)]
        configurations = [rule for rule in rules if not isinstance(rule, Rule)]
        found = spike_rules([*configurations, *training_rules(objects)])
        if not found:
            return None
        guard = SpikeGuard(
            found, self._on_spike, self.out_dir, lambda: self._models, self._flush_spikes
        )
        guard.start()
        self._handles.append(register_optimizer_step_post_hook(self._after_update))
        return guard

    # ----- registration -----

    def register_module(self, module: torch.nn.Module) -> None:
        """Save this module's parameters, gradients and module outputs; its forward is a step."""
        if not isinstance(module, torch.nn.Module):
            raise ConfigError("module", module, "a torch.nn.Module")
        model = naming.unwrap(module)
        if model is not module and getattr(module, "_orig_mod", None) is not None:
            # A compiled model: a check in every module on every step would break its graph.
            self.guard = None
            self._functional_owner = ""  # nor are its activation functions watched
        if id(model) in self._registered:
            log.warning("trainprobe: %s is already registered; ignored", type(model).__name__)
            return
        if self.profiler is not None:
            # First, so that each step's timing includes the hook's own work.
            self.profiler.register_module(model)
        top = type(model).__name__
        self._top_names[id(model)] = top
        if not self._models and (self.guard is not None or self.spikes is not None):
            # Checks at each update of the first model registered (any optimizer's).
            self._handles.append(register_optimizer_step_pre_hook(self._before_update))
        self._models.append(model)
        if self.follow_training and self._lightning.watch(model):
            self._lightning_models.add(id(model))
        # Following the training, the step's mode is decided before the profiler starts it.
        self._handles.append(
            attach_forward_pre_hook(
                model, self._step_hook(id(model)), with_kwargs=True, prepend=self.follow_training
            )
        )
        parameters = [
            (naming.parameter_name(top, name), parameter)
            for name, parameter in model.named_parameters()
        ]
        saved_names = {id(parameter): name for name, parameter in parameters}
        for qualified, submodule in model.named_modules():
            if id(submodule) in self._module_names:
                continue
            name = qualified or top
            self._module_names[id(submodule)] = name
            self.module_maps[submodule] = name
            setattr(submodule, "_module_name", name)  # noqa: B010 (smdebug's name for subclasses)
            # A subclass's forward_hook (smdebug's extension point) replaces the hook's own.
            self.module_types.add(name, submodule)
            if self.guard is not None:
                own = [
                    (saved_names[id(parameter)], parameter)
                    for parameter in submodule.parameters(recurse=False)
                ]
                self.guard.register(name, submodule, own)
            if self._overrides_forward_hook():  # smdebug's extension point sees every forward
                self._handles.append(attach_forward_hook(submodule, self.forward_hook))
            else:
                self._saved_modules.append((submodule, name))
        self._saved_parameters.extend(p for p in parameters if p[1].requires_grad)
        self._unhook_saved_modules()  # hooked again, this model too, at the next saved step
        self._handles.append(attach_forward_hook(model, self._forward_end))
        self._registered[id(model)] = parameters

    register_hook = register_module

    def _hook_saved_modules(self, due: int) -> None:
        """Hook, for a step saving the collections in ``due`` (SAVE_EVERYTHING: the step is
        saved in full), the modules whose inputs or outputs they hold and, unless following the
        training, the gradients they hold; watch activation functions if they hold those.

        A module is judged by the names of its first input and output: a hooked module slows
        every call of it, so a step that saves only parameters, gradients and losses hooks none
        of the model's modules."""
        if due == self._hooked_for:
            return
        self._unhook_saved_modules()
        self._hooked_for = due
        everything = due == SAVE_EVERYTHING

        def holds(*names: str) -> bool:
            return everything or self.plan.holds_any(names, due)

        for module, name in self._saved_modules:
            if holds(f"{name}{naming.INPUT_SUFFIX}0", f"{name}{naming.OUTPUT_SUFFIX}0"):
                hook = self._module_hook(name)
                self._save_handles.append(attach_forward_hook(module, hook))
        if not self.follow_training:  # else the gradients are read at the update
            for name, parameter in self._saved_parameters:
                if holds(naming.gradient_name(name)):
                    hook = self._gradient_hook(name, parameter)
                    self._save_handles.append(parameter.register_hook(hook))  # type: ignore[no-untyped-call]
        self._functions_saved = holds(
            *(
                f"{top}.{kind}{suffix}0"
                for top in self._top_names.values()
                for kind in FUNCTION_TYPES
                for suffix in (naming.INPUT_SUFFIX, naming.OUTPUT_SUFFIX)
            )
        )

    def _unhook_saved_modules(self) -> None:
        for handle in self._save_handles:
            handle.remove()
        self._save_handles.clear()
        self._hooked_for = 0
        self._functions_saved = False

    def _forward_end(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        self._functional.stop()
        if self._guarding and self.guard is not None:
            self.guard.add_output(outputs)
        if self.follow_training:
            loss = output_loss(outputs)
            if loss is not None:
                self._on_loss(LossSource.OUTPUT, LOSS_NAME, loss)

    # ----- following the training (follow_training) -----

    def start_following_training(self) -> None:
        """Read steps, modes and losses from the training from now on (``follow_training``).

        The process has one watch of its losses: the hook that called this last hears them."""
        watch = loss_watch()
        watch.listener, watch.backward_ended = self._on_loss, self._on_backward_end
        if self.follow_training:
            return
        self.follow_training = True
        steps = optimizer_steps()
        steps.on_update, steps.on_closure_evaluated = self._on_update, self._on_closure_evaluated

    def _stop_following_training(self) -> None:
        if not self.follow_training:
            return
        steps = optimizer_steps()
        if steps.on_update == self._on_update:
            steps.on_update = steps.on_closure_evaluated = None
        self._lightning.stop()
        watch = loss_watch()
        if watch.listener == self._on_loss:
            watch.listener = watch.backward_ended = None

    def _on_loss(
        self,
        source: LossSource,
        name: str,
        loss: torch.Tensor,
        module: torch.nn.Module | None = None,
    ) -> None:
        """A loss of the step in progress, from ``source`` (see ``training_losses``)."""
        if self._failed or self._closed or self._replaying:
            return
        if self._guarding and self.guard is not None:
            self.guard.add_loss(name, loss)
        if module is not None and name not in self._losses:
            self._losses.add(name)
            self.module_types.add(name, module)
        if source is LossSource.BACKWARD:
            self._backward_in_step = True
        self._step_losses.add(source, name, loss, first_only=self.mode is not ModeKeys.TRAIN)

    def _on_step_result(self, source: LossSource, loss: torch.Tensor) -> None:
        """What a Lightning step returned or logged as its loss (``lightning_losses``)."""
        self._on_loss(source, LOSS_NAME, loss)

    @_guarded
    def _on_backward_end(self) -> None:
        """A backward pass of the training ended. A training that updates its parameters
        without ``torch.optim`` (by hand, another library's optimizer, or not at all) has its
        TRAIN step's gradients now: they are saved before its update or ``zero_grad()``."""
        if (
            not self._active
            or self._gradients_saved
            or self._replaying
            or self.mode is not ModeKeys.TRAIN
            or not self._updates_by_hand()
        ):
            return
        self._gradients_saved = True
        self._save_gradients(self._saved_parameters)

    def _on_closure_evaluated(self, optimizer: torch.optim.Optimizer) -> None:
        """An optimizer step's closure ran once: its loss is the step's (``step()`` returns
        it); the evaluations that follow, at other weights, are not part of it."""
        if self._train_step_open and not (self._failed or self._closed) and self._owns(optimizer):
            self._step_losses.complete = True

    def _continues_train_step(self, model: torch.nn.Module) -> bool:
        """Take the mode of a forward of ``model`` from the training; True when the forward is
        one more micro-batch of the TRAIN step in progress."""
        mode = mode_of(model)
        if mode is ModeKeys.TRAIN and self._train_step_open:
            if not (self._backward_in_step and self._updates_by_hand()):
                self._repeat_forward = True
                if self.profiler is not None:
                    self.profiler.continues_step = True
                return True
            self._train_step_open = False  # a training that updates without torch.optim
            self._end_train_step()
        self._repeat_forward = False
        self._train_step_open = mode is ModeKeys.TRAIN
        if mode is not self.mode:
            self.set_mode(mode)
        return False

    def _updates_by_hand(self) -> bool:
        """Whether the training updates its parameters without a ``torch.optim`` optimizer
        (asked once, when a TRAIN forward follows a backward before any update was seen)."""
        if self._by_hand is None:
            self._by_hand = not optimizer_created()
        return self._by_hand

    # ----- in-training rules (training_rules) -----

    def _before_update(
        self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any
    ) -> tuple[Any, Any] | None:
        """An optimizer is about to step: the non-finite guard checks the step's gradients, then
        the spike rules judge the TRAIN step. Given a closure (Lightning's, LBFGS's), the step's
        forward and backward run inside the optimizer's step: both act once the closure ran."""
        if self._closed or self._failed or not self._owns(optimizer):
            return None
        if self._guarding or self.spikes is not None:
            checked = with_closure(args, kwargs, lambda c: self._after_closure(c, optimizer))
            if checked is not None:
                return checked
        self._check_update(optimizer)
        return None

    def _after_closure(
        self, closure: Callable[[], Any], optimizer: torch.optim.Optimizer
    ) -> Callable[[], Any]:
        def checked() -> Any:
            loss = closure()
            self._check_update(optimizer)
            return loss

        return checked

    def _check_update(self, optimizer: torch.optim.Optimizer) -> None:
        waited, started = device_wait_seconds(), time.perf_counter()
        try:
            self._check_nonfinite(NonFiniteGuard.check_update)
            self._judge_update(optimizer)
        finally:
            self._account(started, waited)

    def _account(self, started: float, waited: float) -> None:
        """Count the time since ``started`` as the hook's own, less any wait for the device
        since ``waited`` (counted apart, against the current step)."""
        elapsed = time.perf_counter() - started
        waiting = device_wait_seconds() - waited
        self._spent += elapsed - waiting
        if waiting:
            self.overhead.add_device_wait(self.step, waiting)

    def _judge_update(self, optimizer: torch.optim.Optimizer) -> None:
        guard = self.spikes
        if guard is None or self.mode not in (ModeKeys.TRAIN, ModeKeys.GLOBAL):
            return
        try:
            where = (self.step, self.mode, self._mode_step(), self._worker_name())
            guard.judge_update(optimizer, self._step_losses.peek(), where)
        except TrainingStopRequested:
            raise  # the rule's StopTraining, before the spiking update
        except Exception as error:
            self._spikes_failed(error)

    def _after_update(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self.spikes is not None:
            self.spikes.after_update(optimizer)

    def _judge_loss(self, loss: torch.Tensor) -> None:
        """An EVAL or PREDICT step's loss: the spike rules judge it (no action)."""
        guard = self.spikes
        if guard is None or self.mode in (ModeKeys.TRAIN, ModeKeys.GLOBAL):
            return
        try:
            guard.judge_loss(loss, (self.step, self.mode, self._mode_step(), self._worker_name()))
        except Exception as error:
            self._spikes_failed(error)

    def _spikes_failed(self, error: Exception) -> None:
        if self.strict:
            raise error
        self.spikes = None
        log.warning(
            "trainprobe: the in-training spike rules stop for the rest of this run (%s: %s); "
            "the training goes on without them",
            type(error).__name__,
            error,
        )

    def _on_spike(self, record: SpikeRecord) -> None:
        """A spike rule found a spike: its records are rewritten on the writer thread."""
        self._write_spikes()

    def _write_spikes(self) -> None:
        guard = self.spikes
        if guard is None or self.dry_run or not self._capture.writes:
            return
        out_dir, worker = self.out_dir, self._worker_name()
        records, judged, names = list(guard.records), guard.judged(), guard.rule_names()

        def write() -> None:
            self.overhead.file_bytes += write_spikes(out_dir, worker, records, judged, names)

        self._capture.ensure_writer().submit(SideJob(write))

    def _flush_spikes(self) -> None:
        """Have the spikes written now, before the training stops."""
        try:
            self._write_spikes()
            self._capture.flush()
        except Exception as error:
            log.warning("trainprobe: the spikes could not be written before the stop: %s", error)

    def _mode_step(self) -> int:
        return self.step if self.mode == ModeKeys.GLOBAL else self.mode_steps[self.mode]

    def _worker_name(self) -> str:
        return self._capture.resolve_worker().name

    def _owns(self, optimizer: torch.optim.Optimizer | None) -> bool:
        """Whether ``optimizer`` updates a registered model (None: a GradScaler's update)."""
        if optimizer is None:
            return True
        owned = self._optimizers.get(id(optimizer))
        if owned is None:
            registered = {id(p) for parameters in self._registered.values() for _, p in parameters}
            owned = any(
                id(parameter) in registered
                for group in optimizer.param_groups
                for parameter in group["params"]
            )
            self._optimizers[id(optimizer)] = owned
        return owned

    def _on_update(self, optimizer: torch.optim.Optimizer | None) -> None:
        """An update of the training: the TRAIN step in progress ends (``follow_training``)."""
        if not self._train_step_open or self._failed or self._closed:
            return
        if not self._owns(optimizer):
            return
        self._train_step_open = False
        self._end_train_step()

    @_guarded
    def _end_train_step(self) -> None:
        if self._active and not self._gradients_saved:
            # The gradients the optimizer used: summed over the step's micro-batches.
            self._save_gradients(self._saved_parameters)
        self._finish_step()

    def _save_gradients(self, parameters: list[tuple[str, torch.nn.Parameter]]) -> None:
        """Save the ``.grad`` of each (saved name, parameter) that has one, together."""
        self._capture.capture(
            [(naming.gradient_name(name), p.grad) for name, p in parameters if p.grad is not None]
        )

    def register_loss(self, loss_module: torch.nn.Module) -> None:
        """Save a loss module's output as ``<LossClass>_output_0`` (the ``losses`` collection)."""
        if not isinstance(loss_module, torch.nn.Module):
            raise ConfigError("loss_module", loss_module, "a torch.nn.Module (a loss)")
        if id(loss_module) in self._module_names:
            return
        name = type(loss_module).__name__
        self._module_names[id(loss_module)] = name
        self.module_maps[loss_module] = name
        setattr(loss_module, "_module_name", name)  # noqa: B010
        self._losses.add(name)
        self.module_types.add(name, loss_module)
        if self._overrides_forward_hook():
            hook = self.forward_hook
        else:
            hook = self._module_hook(name, always=True)  # for the guard and the spike rules
        self._handles.append(attach_forward_hook(loss_module, hook))

    def _step_hook(self, model_id: int) -> Callable[..., None]:
        def step_start(module: torch.nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
            if model_id in self._lightning_models:
                self._lightning.follow(module)
            if self.follow_training and self._continues_train_step(module):
                pass
            elif self._failed or self._closed:
                self._advance()
            else:
                self._on_step_start(model_id)
            if "num_items_in_batch" in kwargs:
                # A Hugging Face model divides each micro-batch's loss by the step's token count.
                self._step_losses.partial = True
            if self._guarding and not self._replaying:
                self._keep_forward(module, args, kwargs)
            # Outside the error guard: a rule's StopTraining request must stop the training.
            self.stop_watch.raise_if_requested(self.step)

        return _eager(step_start)

    def _module_hook(self, name: str, always: bool = False) -> Callable[..., None]:
        """The forward hook of a module saved at this step (``always``: a loss module, heard
        at every step)."""
        capture = _eager(functools.partial(self._on_module_io, name))

        def module_hook(module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
            if self._replaying:
                return
            if self._active:
                capture(inputs, outputs)
            # Out of compiled regions: it would break the graph every step.
            elif always and not torch.compiler.is_compiling():
                self._on_module_io(name, inputs, outputs)  # eager: no graph-break wrapper

        return module_hook

    def _gradient_hook(
        self, name: str, parameter: torch.nn.Parameter
    ) -> Callable[[torch.Tensor], None]:
        """A parameter's gradient hook in a saved step: the gradients the backward computed are
        saved together from ``.grad`` when it ends (their reductions batched; holding the
        tensor the hook sees would make autograd copy it into ``.grad``)."""

        def gradient_hook(grad: torch.Tensor) -> None:
            if not self._active:
                return
            if not self._backward_gradients:
                when_backward_ends(self._save_backward_gradients)
            self._backward_gradients.append((name, parameter))

        return gradient_hook

    # ----- modes, collections -----

    def set_mode(self, mode: ModeKeys) -> None:
        """Switch to TRAIN, EVAL, PREDICT or GLOBAL; the next forward starts a step of that mode."""
        mode = ModeKeys.parse(mode)
        self.mode = mode
        if self.profiler is not None:
            self.profiler.set_mode(mode)

    def get_collection(self, name: str, create: bool = True) -> Collection:
        """The collection ``name`` (created if missing and ``create``); ``.include(regex)`` it."""
        return self.collections.get(name, create=create)

    def get_collections(self) -> dict[str, Collection]:
        """Every collection of this hook, by name."""
        return {collection.name: collection for collection in self.collections}

    def add_collection(self, collection: Collection) -> None:
        """Add a collection built by hand (it is saved if named in ``include_collections``)."""
        self.collections.add(collection)

    # ----- the step -----

    @property
    def worker(self) -> str | None:
        """This process's worker name (``worker_<rank>``), once known."""
        worker = self._capture.worker
        return worker.name if worker is not None else None

    def _advance(self) -> int:
        """Count a new step; returns its mode step."""
        self.step += 1
        self.mode_steps[self.mode] += 1
        return self.step if self.mode == ModeKeys.GLOBAL else self.mode_steps[self.mode]

    @_guarded
    def _on_step_start(self, model_id: int) -> None:
        self._functional.stop()  # a forward that raised never reached its end
        self._raise_writer_error_if_strict()
        self._finish_step()
        mode_step = self._advance()
        self._gradients_saved = False
        self._prepare_if_changed()
        if not self._capture.writes:
            self._guarding = False
            return  # another rank writes (include_workers="one")
        guard = self.guard
        if guard is not None:
            guard.begin(self.step, self.mode, mode_step)
            self._guarding = guard.on
        due = self.plan.due(self.mode, mode_step)
        if self.dry_run:
            if due:
                names = ", ".join(c.name for c in self.plan.collections_in(due))
                log.info("trainprobe dry run: step %d would save %s", self.step, names)
            return
        self._write_overhead_if_due()
        if self.module_types.unwritten:
            self._write_module_types()
        self._capture.begin(self.step, self.mode, mode_step, due)
        self._active = bool(due)
        if due:
            self._hook_saved_modules(due)
        else:
            self._unhook_saved_modules()
        if self.spikes is not None and (due or not self._spikes_announced):
            # The rules' evaluators learn early that the training judges them, and how far.
            self._spikes_announced = True
            self._write_spikes()
        if due:
            self._save_pending()
            self._capture.capture(self._registered.get(model_id, []))
            if self._functional_owner != "" and self._functions_saved:
                self._functional_owner = self._top_names.get(model_id)
                self._functional.start()
        if guard is not None and guard.save_next_in_full:
            guard.save_next_in_full = False
            self._save_rest_in_full()

    def _save_rest_in_full(self) -> None:
        """The step has gone non-finite: save the rest of it raw, and every parameter."""
        self._capture.save_in_full()
        self._active = True
        self._hook_saved_modules(SAVE_EVERYTHING)
        for parameters in self._registered.values():
            self._capture.capture(parameters)

    def _save_pending(self) -> None:
        scalars, self._pending_scalars = self._pending_scalars, {}
        for name, (value, timestamp) in scalars.items():
            self._capture.add_scalar(name, value, timestamp)
        tensors, self._pending_tensors = self._pending_tensors, {}
        for name, (tensor, collections) in tensors.items():
            self._save_tensor(name, tensor, collections)

    def _prepare_if_changed(self) -> None:
        revision = self.collections.revision
        if revision == self.plan.revision and len(self._module_names) == self._names_resolved:
            return
        self._resolve_module_collections()
        self.module_types.attach(self.collections)
        self._names_resolved = len(self._module_names)
        if self.plan.is_stale():
            self.plan.prepare(strict=self.strict)
        if self._hooked_for:
            self._hooked_for = None  # hooked again for the new plan at the next saved step

    def _resolve_module_collections(self) -> None:
        for collection in self.collections:
            for module, (inputs, outputs) in list(collection.modules.items()):
                key = (id(collection), id(module))
                name = self._module_names.get(id(module))
                if name is None or key in self._resolved_modules:
                    continue
                self._resolved_modules.add(key)
                if inputs:
                    collection.include(name + naming.INPUT_SUFFIX)
                if outputs:
                    collection.include(name + naming.OUTPUT_SUFFIX)

    def _write_overhead_if_due(self) -> None:
        """Have the writer thread save the overhead so far, when a minute has passed."""
        if not self._overhead_file.reserved:
            self._overhead_file.reserved = True
            reserve = functools.partial(
                self._overhead_file.reserve, self._capture.resolve_worker().name
            )
            self._capture.ensure_writer().submit(SideJob(reserve))
        now = time.monotonic()
        if now < self._overhead_due_at or not self._overhead_file.enabled:
            return
        self._overhead_due_at = now + OVERHEAD_WRITE_SECONDS
        write = functools.partial(self._overhead_file.write, self._capture.resolve_worker().name)
        self._capture.ensure_writer().submit(SideJob(write))

    def _write_module_types(self) -> None:
        """Have the writer thread record the module types registered so far."""
        self.module_types.unwritten = False
        out_dir, worker = self.out_dir, self._capture.resolve_worker().name
        modules = dict(self.module_types.modules)

        def write() -> None:
            self.overhead.file_bytes += write_module_types(out_dir, worker, modules)

        self._capture.ensure_writer().submit(SideJob(write))

    def _finish_step(self) -> None:
        self._save_step_losses()
        self._active = False
        guard = self.guard
        if guard is not None:
            self._check_nonfinite(NonFiniteGuard.finish, always=True)
            self._guarding = guard.on and self.guard is not None
            if guard.unwritten:
                self._write_origin(guard)
        finished = self._capture.finish()
        if finished is not None:
            self.overhead.add(finished.step, self._spent)
            self._spent = 0.0

    def _save_step_losses(self) -> None:
        """Check and save the losses the step computed (``follow_training``)."""
        self._backward_in_step = False
        losses = self._step_losses.take()
        if losses:
            self._judge_loss(losses[0][1])
        if not self.follow_training:
            return  # a hook that does not follow the training saves its losses as they come
        for name, loss in losses:
            self._capture.capture_named(name, naming.OUTPUT_SUFFIX, loss)

    def _close_records(self) -> None:
        """Write what is still unwritten of the module types and the non-finite origin."""
        if self.dry_run or not self._capture.writes:
            return
        if self.module_types.unwritten and self.step >= 0:
            self._write_module_types()
        if self.spikes is not None:
            try:
                self.spikes.read_pending(wait=True)
            except Exception as error:
                self._spikes_failed(error)
        self._write_spikes()  # with the final counts of the steps judged
        guard = self.guard
        if guard is not None:
            try:
                guard.close()
            except Exception as error:
                self._guard_failed(error)
            if guard.unwritten:
                self._write_origin(guard)

    def _guard_failed(self, error: Exception) -> bool:
        """The non-finite guard failed: it turns itself off; saving and training go on."""
        if self.strict:
            raise error
        self.guard, self._guarding = None, False
        log.warning(
            "trainprobe: the non-finite guard stops for the rest of this run (%s: %s); "
            "tensors are still saved as configured",
            type(error).__name__,
            error,
        )
        return False

    def _write_origin(self, guard: NonFiniteGuard) -> None:
        """Have the writer thread record where the first NaN started (before the step ends)."""
        guard.unwritten = False
        origin, out_dir = guard.origin, self.out_dir
        if origin is None:
            return
        worker = self._capture.resolve_worker().name
        log.warning("trainprobe: %s", origin.describe())

        def write() -> None:
            self.overhead.file_bytes += write_nonfinite_origin(out_dir, worker, origin)

        self._capture.ensure_writer().submit(SideJob(write))

    def _check_nonfinite(
        self, check: Callable[[NonFiniteGuard], None], *, always: bool = False
    ) -> None:
        """Run one of the guard's checks (``always``: even while it is not guarding the step).
        A replay it makes runs the model's forward: the hook's own forward hooks stand aside."""
        guard = self.guard
        if guard is None or not (self._guarding or always):
            return
        self._replaying = True
        try:
            check(guard)
        except Exception as error:
            self._guard_failed(error)
        finally:
            self._replaying = False

    @_guarded
    def _keep_forward(self, model: torch.nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
        """A forward of the step starts: the guard keeps what a replay of it needs."""
        self._check_nonfinite(lambda guard: guard.keep_forward(model, args, kwargs))

    def _save_found_step(self, losses: list[tuple[str, torch.Tensor]]) -> None:
        """The guard found the open step non-finite: save the rest of it in full, with its
        non-finite losses and its gradients (read at the update when following the training)."""
        self._save_rest_in_full()
        if self.follow_training:
            return
        for name, loss in losses:
            self._capture.capture_named(name, naming.OUTPUT_SUFFIX, loss)
        self._save_gradients(self._saved_parameters)

    def _save_io(self, name: str, inputs: Any, outputs: Any) -> None:
        """Save a module's (or an activation function's) inputs and outputs: in a saved step,
        and for a non-finite step's replay from its origin on."""
        self._capture.capture_named(name, naming.INPUT_SUFFIX, inputs)
        self._capture.capture_named(name, naming.OUTPUT_SUFFIX, outputs)

    @_guarded
    def _on_module_io(self, name: str, inputs: Any, outputs: Any) -> None:
        is_loss = name in self._losses
        if is_loss and self.follow_training:
            return  # the step's losses are checked and saved at its end
        if is_loss and isinstance(outputs, torch.Tensor):
            if self.spikes is not None:
                self._step_losses.add(LossSource.MODULE, name, outputs)  # for the spike rules
            if self._guarding and self.guard is not None:
                self.guard.add_loss(name, outputs)
        if self._active and not self._repeat_forward:
            self._save_io(name, inputs, outputs)

    @_guarded
    def _on_function(self, kind: str, inputs: Any, outputs: Any) -> None:
        """An activation function was called in the forward of a save step."""
        owner = self._functional_owner
        if not self._active or owner is None or self._repeat_forward:
            return
        name = f"{owner}.{kind}"
        if name not in self.module_types.modules:
            self.module_types.modules[name] = FUNCTION_TYPES[kind]
            self.module_types.unwritten = True
        self._save_io(name, inputs, outputs)

    @_guarded
    def _on_gradient(self, name: str, grad: torch.Tensor) -> None:
        """A gradient handed in by smdebug's ``backward_hook`` (a subclass's tensor hook)."""
        if self._active:
            self._capture.capture([(name, grad)])

    @_guarded
    def _save_backward_gradients(self) -> None:
        computed, self._backward_gradients = self._backward_gradients, []
        if self._active:
            self._save_gradients(computed)

    @_guarded
    def _save_named(self, name: str, suffix: str, value: Any) -> None:
        self._capture.capture_named(name, suffix, value)

    # ----- values the training script passes in -----

    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """Save a tensor computed outside modules (a functional loss) as ``<name>_output_<i>``."""
        if not isinstance(tensor_value, torch.Tensor):
            raise ConfigError("tensor_value", tensor_value, "a torch.Tensor")
        if self._active:
            self._record(tensor_name, tensor_value)

    @_guarded
    def _record(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        self._capture.capture_named(tensor_name, naming.OUTPUT_SUFFIX, tensor_value)

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
            self._prepare_if_changed()
            current.due = self.plan.due(current.mode, current.mode_step)
            self._active = bool(current.due)
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
        self._add_scalar(full_name, value, timestamp)

    @_guarded
    def _add_scalar(self, name: str, value: object, timestamp: float | None) -> None:
        self._capture.add_scalar(name, value, timestamp)

    # ----- failures -----

    def _fail(self, error: BaseException) -> None:
        if self.strict:
            raise error
        if self._failed:
            return
        self._failed = True
        self._active = False
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
        self._overhead_file.write(self._capture.resolve_worker().name)
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
        if self._closed:
            return
        self._closed = True
        self._functional.stop()
        self._stop_following_training()
        if self.spikes is not None:
            self.spikes.stop()
        if self.profiler is not None:
            try:
                self.profiler.close()
            except Exception:
                log.warning("trainprobe: closing the framework profiler failed", exc_info=True)
        try:
            if not self._failed:
                if self._capture.current is not None and self._capture.writes:
                    self._save_pending()  # smdebug writes what it still holds into the last step
                self._finish_step()
                self._close_records()
        except Exception as error:
            self._fail(error)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._unhook_saved_modules()
        if self.dry_run or not self._capture.writes:
            return
        try:
            worker = self._capture.resolve_worker()
            self._capture.close(training_end=worker.is_chief)
            # The writer thread has stopped: the count of bytes is final.
            self._overhead_file.write(worker.name)
            self._overhead_file.release(worker.name)
        except Exception as error:
            self._fail(error)
        self._raise_writer_error_if_strict()

    def __repr__(self) -> str:
        return (
            f"<trainprobe.pytorch.Hook out_dir={self.out_dir!r} step={self.step} "
            f"mode={self.mode.name} collections={[c.name for c in self.plan.saved]}>"
        )


def _eager(function: Callable[..., _R]) -> Callable[..., _R]:
    """``function`` run as plain Python even inside a compiled region (a graph break)."""
    return torch.compiler.disable(function)  # type: ignore[no-untyped-call,no-any-return]
