"""The training follower: the one source of a PyTorch training's step events.

It puts the only hooks trainprobe's capture needs on a training's steps: per registered model, one
forward pre-hook and one forward hook (``module_hooks``); per process, PyTorch's global optimizer
step hooks, through ``training_steps.optimizer_steps``. From them it decides where steps start and
end, and in which mode:

- smdebug's way (the default): each forward of a registered model starts a step of the mode
  ``set_mode`` set;
- following the training (``Hook(follow_training=True)``, the hook ``trainprobe run`` installs):
  the training's own way (``training_steps``): a TRAIN step is one update, however many forwards
  it took (micro-batches, a closure's evaluations); a training that updates without
  ``torch.optim`` ends its step at the next TRAIN forward after a backward; the mode comes from
  the model and the grad mode; the step's losses are heard wherever the training computes them
  (``training_losses``, ``lightning_losses``).

Each event is handed once to the listeners (``StepListener``), in the order they subscribed: the
framework profiler first (a step's time then includes the hook's own work), then the hook, whose
in-training checks act on the updates. A step's numbers (``StepStart``) are counted here alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from trainprobe.capture.pytorch.lightning_losses import LightningLosses
from trainprobe.capture.pytorch.module_hooks import (
    ModuleHookHandle,
    attach_forward_hook,
    attach_forward_pre_hook,
)
from trainprobe.capture.pytorch.training_losses import (
    LOSS_NAME,
    LossSource,
    StepLosses,
    loss_watch,
    output_loss,
)
from trainprobe.capture.pytorch.training_steps import (
    UpdateListener,
    mode_of,
    optimizer_created,
    optimizer_steps,
)
from trainprobe.storage.modes import ModeKeys

__all__ = ["EVENTS", "GuardedListener", "StepListener", "StepStart", "TrainingFollower"]

_R = TypeVar("_R")


def _eager(function: Callable[..., _R]) -> Callable[..., _R]:
    """``function`` run as plain Python even inside a compiled region (a graph break)."""
    return torch.compiler.disable(function)  # type: ignore[no-untyped-call,no-any-return]


@dataclass(frozen=True)
class StepStart:
    """A step that starts: its global step, its mode and its step within the mode, and the
    model whose forward starts it."""

    step: int
    mode: ModeKeys
    mode_step: int
    model: torch.nn.Module


EVENTS = (
    "step_ended",
    "step_started",
    "step_continued",
    "forward_starting",
    "forward_ended",
    "loss_heard",
    "backward_ended",
    "update_starting",
    "closure_evaluated",
    "update_ended",
)
"""The step events, by the name of the ``StepListener`` method that hears each."""


class StepListener(UpdateListener):
    """What hears a training's step events (see the module docstring); each method does nothing
    unless overridden, and a listener hears only the events it overrides (``hears``). The
    updates' methods are ``UpdateListener``'s."""

    def hears(self, event: str) -> bool:
        """Whether this listener does something at ``event`` (overrides its method)."""
        return getattr(type(self), event) is not getattr(StepListener, event)

    def step_ended(self, *, at_update: bool) -> None:
        """The step in progress ends: a new one starts, or (``at_update``) the update that
        ends a TRAIN step happened (or a training updating by hand went on to its next step)."""

    def step_started(self, start: StepStart) -> None:
        """A step starts with a forward of ``start.model``."""

    def step_continued(self, model: torch.nn.Module) -> None:
        """A forward of ``model`` continues the TRAIN step in progress (a micro-batch, a
        closure's evaluation)."""

    def forward_starting(
        self, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """A forward of ``model`` starts (after ``step_started`` or ``step_continued``)."""

    def forward_ended(self, model: torch.nn.Module, outputs: Any) -> None:
        """A forward of ``model`` returned ``outputs``."""

    def loss_heard(
        self, source: LossSource, name: str, loss: torch.Tensor, module: torch.nn.Module | None
    ) -> None:
        """A loss of the step in progress (following the training)."""

    def backward_ended(self) -> None:
        """A backward pass of the training ended (following the training)."""


class GuardedListener(StepListener):
    """``listener``'s step events, each run through ``run(method, *args)``: the hook's entry
    point, which times it as the hook's own time and keeps its failures out of the training.
    The hook's collaborators hear the events this way."""

    def __init__(self, run: Callable[..., Any], listener: StepListener) -> None:
        self._run = run
        self._listener = listener

    def hears(self, event: str) -> bool:
        return self._listener.hears(event)

    def step_started(self, start: StepStart) -> None:
        self._run(self._listener.step_started, start)

    def forward_starting(
        self, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self._run(self._listener.forward_starting, model, args, kwargs)

    def forward_ended(self, model: torch.nn.Module, outputs: Any) -> None:
        self._run(self._listener.forward_ended, model, outputs)

    def loss_heard(
        self, source: LossSource, name: str, loss: torch.Tensor, module: torch.nn.Module | None
    ) -> None:
        self._run(self._listener.loss_heard, source, name, loss, module)

    def backward_ended(self) -> None:
        self._run(self._listener.backward_ended)

    def update_starting(
        self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        result: tuple[tuple[Any, ...], dict[str, Any]] | None = self._run(
            self._listener.update_starting, optimizer, args, kwargs
        )
        return result

    def update_ended(self, optimizer: Any) -> None:
        self._run(self._listener.update_ended, optimizer)


class TrainingFollower(UpdateListener):
    """Counts a training's steps and hands their events to its listeners (see the module
    docstring). ``parameters`` gives the ids of the registered models' parameters (whose
    optimizers' updates are the training's); ``listening`` says whether events are wanted now
    (not while the hook replays a step, nor once it has failed or closed)."""

    def __init__(
        self, parameters: Callable[[], Iterable[int]], listening: Callable[[], bool]
    ) -> None:
        self.step = -1
        self.mode = ModeKeys.GLOBAL
        self.mode_steps = dict.fromkeys(ModeKeys, -1)
        self.following = False
        self.losses = StepLosses()
        """The losses the step in progress computed (following the training)."""
        self.continuing = False
        """Whether the forward in progress continues the TRAIN step (a micro-batch, a closure's
        evaluation): its modules' outputs are not saved again."""
        self.listeners: list[StepListener] = []
        self._hearing: dict[str, list[StepListener]] = {event: [] for event in EVENTS}
        self._parameters = parameters
        self._listening = listening
        self._lightning = LightningLosses(self._step_result)
        self._lightning_models: set[int] = set()
        self._train_step_open = False
        self._backward_in_step = False
        self._by_hand: bool | None = None
        self._optimizers: dict[int, bool] = {}
        self._handles: list[ModuleHookHandle] = []
        optimizer_steps().subscribe(self)

    def subscribe(self, listener: StepListener) -> None:
        """Hand ``listener`` the step events it hears from now on, after the listeners before
        it."""
        if listener not in self.listeners:
            self.listeners.append(listener)
            self._sort()

    def unsubscribe(self, listener: StepListener) -> None:
        """Stop handing ``listener`` the step events."""
        if listener in self.listeners:
            self.listeners.remove(listener)
            self._sort()

    def _sort(self) -> None:
        self._hearing = {
            event: [listener for listener in self.listeners if listener.hears(event)]
            for event in EVENTS
        }

    @property
    def mode_step(self) -> int:
        """The step in progress within its mode (the global step in GLOBAL mode)."""
        return self.step if self.mode == ModeKeys.GLOBAL else self.mode_steps[self.mode]

    # ----- the models -----

    def watch(self, model: torch.nn.Module, *, first: bool) -> None:
        """Take ``model``'s forwards as steps (``first``: its pre-hook runs before any other,
        so that a step's mode is known before anyone starts it)."""
        starting, ended = _eager(self._forward_starting), _eager(self._forward_ended)
        self._handles.append(
            attach_forward_pre_hook(model, starting, with_kwargs=True, prepend=first)
        )
        self._handles.append(attach_forward_hook(model, ended))
        if self.following and self._lightning.watch(model):
            self._lightning_models.add(id(model))

    def _forward_starting(
        self, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        if id(model) in self._lightning_models:
            self._lightning.follow(model)
        if self.following and self._continues_train_step(model):
            self.continuing = True
            for listener in self._hearing["step_continued"]:
                listener.step_continued(model)
        else:
            self.continuing = False
            self._next_step(model)
        if "num_items_in_batch" in kwargs:
            # A Hugging Face model divides each micro-batch's loss by the step's token count.
            self.losses.partial = True
        for listener in self._hearing["forward_starting"]:
            listener.forward_starting(model, args, kwargs)

    def _next_step(self, model: torch.nn.Module, *, at_update: bool = False) -> None:
        self._end_step(at_update=at_update)
        self.step += 1
        self.mode_steps[self.mode] += 1
        start = StepStart(self.step, self.mode, self.mode_step, model)
        for listener in self._hearing["step_started"]:
            listener.step_started(start)

    def _end_step(self, *, at_update: bool) -> None:
        if self.step < 0:
            return
        for listener in self._hearing["step_ended"]:
            listener.step_ended(at_update=at_update)

    def _forward_ended(self, model: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        if self.following:
            loss = output_loss(outputs)
            if loss is not None:
                self._loss(LossSource.OUTPUT, LOSS_NAME, loss)
        for listener in self._hearing["forward_ended"]:
            listener.forward_ended(model, outputs)

    def close(self) -> None:
        """Hear nothing more: the models' hooks come off; the step in progress is the hook's
        to end (as the training followed, or not)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._stop_hearing()
        optimizer_steps().unsubscribe(self)

    # ----- following the training -----

    def start_following(self) -> None:
        """Read steps, modes and losses from the training from now on. The process has one
        watch of its losses: the follower that started following last hears them."""
        watch = loss_watch()
        watch.listener, watch.backward_ended = self._loss, self._backward_ended
        self.following = True

    def _stop_hearing(self) -> None:
        """Stop hearing the training's losses."""
        self._lightning.stop()
        watch = loss_watch()
        if watch.listener == self._loss:
            watch.listener = watch.backward_ended = None

    def set_mode(self, mode: ModeKeys) -> None:
        """The next step is of ``mode``."""
        self.mode = mode

    def _continues_train_step(self, model: torch.nn.Module) -> bool:
        """Take the mode of a forward of ``model`` from the training; True when the forward is
        one more micro-batch of the TRAIN step in progress."""
        mode = mode_of(model)
        if mode is ModeKeys.TRAIN and self._train_step_open:
            if not (self._backward_in_step and self._updates_by_hand()):
                return True
            self._train_step_open = False  # a training that updates without torch.optim
            self._end_step(at_update=True)
        self._train_step_open = mode is ModeKeys.TRAIN
        self.mode = mode
        return False

    def updates_by_hand(self) -> bool:
        """Whether the training updates its parameters without a ``torch.optim`` optimizer."""
        return self._updates_by_hand()

    def _updates_by_hand(self) -> bool:
        """Asked once, when it first matters: when a backward ends, or a TRAIN forward follows
        a backward before any update was seen."""
        if self._by_hand is None:
            self._by_hand = not optimizer_created()
        return self._by_hand

    def owns(self, optimizer: torch.optim.Optimizer | None) -> bool:
        """Whether ``optimizer`` updates a registered model (None: a GradScaler's update)."""
        if optimizer is None:
            return True
        owned = self._optimizers.get(id(optimizer))
        if owned is None:
            registered = set(self._parameters())
            owned = any(
                id(parameter) in registered
                for group in optimizer.param_groups
                for parameter in group["params"]
            )
            self._optimizers[id(optimizer)] = owned
        return owned

    def _loss(
        self,
        source: LossSource,
        name: str,
        loss: torch.Tensor,
        module: torch.nn.Module | None = None,
    ) -> None:
        """A loss of the step in progress, from ``source`` (see ``training_losses``)."""
        if not self._listening():
            return
        if source is LossSource.BACKWARD:
            self._backward_in_step = True
        for listener in self._hearing["loss_heard"]:
            listener.loss_heard(source, name, loss, module)
        self.losses.add(source, name, loss, first_only=self.mode is not ModeKeys.TRAIN)

    def _step_result(self, source: LossSource, loss: torch.Tensor) -> None:
        """What a Lightning step returned or logged as its loss (``lightning_losses``)."""
        self._loss(source, LOSS_NAME, loss)

    def _backward_ended(self) -> None:
        if not self._listening():
            return
        for listener in self._hearing["backward_ended"]:
            listener.backward_ended()

    def take_losses(self) -> list[tuple[str, torch.Tensor]]:
        """The losses of the step that ends (see ``StepLosses.take``)."""
        self._backward_in_step = False
        return self.losses.take()

    # ----- the updates (UpdateListener) -----

    def update_starting(
        self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        changed = False
        for listener in self._hearing["update_starting"]:
            arguments = listener.update_starting(optimizer, args, kwargs)
            if arguments is not None:
                args, kwargs = arguments
                changed = True
        return (args, kwargs) if changed else None

    def closure_evaluated(self, optimizer: Any) -> None:
        """An optimizer step's closure ran once: its loss is the step's (``step()`` returns
        it); the evaluations that follow, at other weights, are not part of it."""
        if self._open_train_step_of(optimizer):
            self.losses.complete = True

    def update_ended(self, optimizer: Any) -> None:
        if optimizer is not None:
            for listener in self._hearing["update_ended"]:
                listener.update_ended(optimizer)
        if self._open_train_step_of(optimizer):
            self._train_step_open = False  # the update ends the TRAIN step in progress
            self._end_step(at_update=True)

    def _open_train_step_of(self, optimizer: Any) -> bool:
        """Whether a TRAIN step followed from the training is open and ``optimizer`` updates
        its model."""
        return (
            self.following and self._train_step_open and self._listening() and self.owns(optimizer)
        )
