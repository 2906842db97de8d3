"""Steps and modes read from the training itself, for a hook that follows the training.

smdebug counts a step at each forward of the model and takes the mode from ``set_mode``. A script
written for Hugging Face's ``Trainer``, Lightning or accelerate calls neither the way smdebug
expects: it runs several forwards per update (gradient accumulation, an optimizer closure),
evaluates in between, and never calls ``set_mode``. A hook that follows the training reads both
from what the training does:

- **the mode** of a forward of the model: TRAIN while the model is in training mode and gradients
  are recorded; PREDICT when a Lightning trainer says it is predicting; EVAL otherwise
  (``model.eval()``, ``torch.no_grad()``, ``torch.inference_mode()``);
- **a TRAIN step** runs from the first forward after an update to the next update: the next
  ``optimizer.step()`` of any ``torch.optim`` optimizer, however a framework wraps it, or a
  ``GradScaler.update()`` that skipped the optimizer's step because of an infinity. EVAL and
  PREDICT steps are counted a forward each, as smdebug counts them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from trainprobe.storage.modes import ModeKeys

__all__ = [
    "OptimizerSteps",
    "UpdateListener",
    "mode_of",
    "optimizer_created",
    "optimizer_steps",
    "when_backward_ends",
    "with_closure",
]


def mode_of(model: torch.nn.Module) -> ModeKeys:
    """The mode of a forward of ``model`` that starts now (see the module docstring)."""
    trainer = getattr(model, "_trainer", None)  # a Lightning module's trainer, when attached
    if trainer is not None and getattr(trainer, "predicting", False) is True:
        return ModeKeys.PREDICT
    if model.training and torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
        return ModeKeys.TRAIN
    return ModeKeys.EVAL


def optimizer_created() -> bool:
    """Whether this process has created a ``torch.optim`` optimizer (of any class).

    PyTorch marks an optimizer class's ``step`` as hooked when it makes the first instance.
    """
    classes: list[type[torch.optim.Optimizer]] = [torch.optim.Optimizer]
    while classes:
        cls = classes.pop()
        if getattr(cls.step, "hooked", False):
            return True
        classes.extend(cls.__subclasses__())
    return False


class UpdateListener:
    """What hears the process's updates (see ``OptimizerSteps``); each method does nothing
    unless overridden."""

    def update_starting(
        self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        """``optimizer.step()`` is about to run (its pre-hook's arguments: the optimizer
        first); new arguments (a closure wrapped), or None to leave them."""
        return None

    def closure_evaluated(self, optimizer: Any) -> None:
        """The closure the step was given has been evaluated the first time: the evaluation
        whose loss ``step()`` returns."""

    def update_ended(self, optimizer: Any) -> None:
        """An update ended: ``optimizer.step()`` returned, or ``GradScaler.update()`` did
        (``optimizer`` is then None: its optimizer's step may have been skipped)."""


class OptimizerSteps:
    """The process's optimizer steps, heard in one place: PyTorch's global optimizer step pre-
    and post-hooks and ``GradScaler.update``, registered once, handed to every subscribed
    ``UpdateListener`` in the order they subscribed.

    ``update_ended`` is called more often than there are updates (a GradScaler's update follows
    the optimizer's step it allowed): the hook counts a TRAIN step only when one is open. The
    process has one (``optimizer_steps``), started before the script runs under the automatic
    hook: a closure whose step began before the hook was made is heard too.
    """

    def __init__(self) -> None:
        self.listeners: list[UpdateListener] = []
        self._handles: list[Any] = []
        self._scaler_update: Any = None

    def subscribe(self, listener: UpdateListener) -> None:
        """Hand ``listener`` the updates from now on (once, however often subscribed)."""
        if listener not in self.listeners:
            self.listeners.append(listener)

    def unsubscribe(self, listener: UpdateListener) -> None:
        """Stop handing ``listener`` the updates."""
        if listener in self.listeners:
            self.listeners.remove(listener)

    def start(self) -> None:
        """Start watching; again, start again what was removed meanwhile (a test that cleared
        PyTorch's global optimizer hooks)."""
        if self._handles and all(_registered(handle) for handle in self._handles):
            return
        for handle in self._handles:
            handle.remove()
        self._handles = [
            register_optimizer_step_pre_hook(self._stepping),
            register_optimizer_step_post_hook(self._stepped),
        ]
        if self._scaler_update is not None:
            return
        scaler = torch.amp.GradScaler
        original = scaler.update
        self._scaler_update = original
        watch = self

        def update(scaler_self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(scaler_self, *args, **kwargs)
            for listener in list(watch.listeners):
                listener.update_ended(None)
            return result

        scaler.update = update  # type: ignore[method-assign,assignment]

    def _stepped(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        for listener in list(self.listeners):
            listener.update_ended(optimizer)

    def _stepping(
        self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        changed = False
        for listener in list(self.listeners):
            arguments = listener.update_starting(optimizer, args, kwargs)
            if arguments is not None:
                args, kwargs = arguments
                changed = True
        watch = self

        def noting_the_first_evaluation(closure: Callable[..., Any]) -> Callable[..., Any]:
            first = True

            @functools.wraps(closure)
            def evaluate(*closure_args: Any, **closure_kwargs: Any) -> Any:
                nonlocal first
                result = closure(*closure_args, **closure_kwargs)
                if first:
                    first = False
                    for listener in list(watch.listeners):
                        listener.closure_evaluated(optimizer)
                return result

            return evaluate

        noted = with_closure(args, kwargs, noting_the_first_evaluation)
        if noted is not None:
            return noted
        return (args, kwargs) if changed else None


def _registered(handle: Any) -> bool:
    hooks = handle.hooks_dict_ref()
    return hooks is not None and handle.id in hooks


_steps: OptimizerSteps | None = None


def optimizer_steps() -> OptimizerSteps:
    """The process's watch of its optimizer steps, started on first use."""
    global _steps
    if _steps is None:
        _steps = OptimizerSteps()
    _steps.start()
    return _steps


def when_backward_ends(callback: Callable[[], None]) -> None:
    """Have autograd call ``callback`` once the backward pass in progress has ended."""
    engine = torch.autograd.Variable._execution_engine  # type: ignore[attr-defined]
    engine.queue_callback(callback)


def with_closure(
    args: tuple[Any, ...], kwargs: dict[str, Any], wrap: Callable[[Callable[..., Any]], Any]
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """An ``optimizer.step()``'s arguments (as its pre-hooks get them: the optimizer first) with
    its closure replaced by ``wrap(closure)``; None when it was given no closure."""
    in_kwargs = "closure" in kwargs
    closure = kwargs["closure"] if in_kwargs else args[1] if len(args) > 1 else None
    if not callable(closure):
        return None
    if in_kwargs:
        return args, {**kwargs, "closure": wrap(closure)}
    return (args[0], wrap(closure), *args[2:]), kwargs
