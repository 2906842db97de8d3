"""The hook, installed into a PyTorch training that does not install it itself.

SageMaker's framework containers hook a plain script without a line of trainprobe in it; this
module does the same for a job's training, from the job's hook configuration file:

- a global module forward pre-hook waits for the first module called that has trainable
  parameters: the model (the top-level module: its forward starts before its submodules'). If
  the script has created a hook of its own by then, that hook is left in charge and nothing else
  happens. Otherwise the hook is made from the configuration file (``get_hook``), the model is
  registered with it, and the step that call starts is counted as step 0;
- loss modules (``torch.nn`` losses) called are registered with ``register_loss``;
- a loss computed without a loss module (``F.cross_entropy``) is recorded when the script
  calls ``loss.backward()`` on it, as ``loss_output_0`` (the ``losses`` collection).

Once the model has run a few steps the global pre-hook removes itself, so the training then
pays nothing for it. Should installing the hook fail, the failure is logged and the training
goes on without it.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import torch
from torch.nn.modules.loss import _Loss

from trainprobe.capture.pytorch import Hook, get_hook
from trainprobe.capture.pytorch.naming import unwrap

__all__ = ["AutoHook", "install"]

log = logging.getLogger("trainprobe")

_STEPS_TO_FIND_A_LOSS = 3
"""Forwards of the model after which no new loss module is looked for."""

FUNCTIONAL_LOSS_NAME = "loss"


class AutoHook:
    """Installs the hook into the first model the training calls (see the module docstring)."""

    def __init__(self) -> None:
        self.hook: Hook | None = None
        self.model: torch.nn.Module | None = None
        self.loss_modules = 0
        self._model_calls = 0
        self._handle: Any = None
        self._backward: Any = None

    def install(self) -> None:
        """Start watching the training's module calls and backward passes."""
        self._handle = torch.nn.modules.module.register_module_forward_pre_hook(
            self._on_forward_pre
        )
        original = torch.Tensor.backward
        self._backward = original
        auto = self

        def backward(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            hook = auto.hook
            if hook is not None and auto.loss_modules == 0 and tensor.numel() == 1:
                with contextlib.suppress(Exception):  # the hook logs its own failures
                    hook.record_tensor_value(FUNCTIONAL_LOSS_NAME, tensor)
            return original(tensor, *args, **kwargs)  # type: ignore[no-untyped-call]

        torch.Tensor.backward = backward  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        """Stop watching (the hook, if one was made, stays)."""
        self._stop_watching_modules()
        if self._backward is not None:
            torch.Tensor.backward = self._backward  # type: ignore[method-assign]
            self._backward = None

    def _stop_watching_modules(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _on_forward_pre(self, module: torch.nn.Module, args: Any) -> None:
        try:
            self._watch(module, args)
        except Exception as error:  # never the training's problem
            log.error(
                "trainprobe: installing the hook automatically failed (%s: %s); the training "
                "goes on without it",
                type(error).__name__,
                error,
            )
            self.uninstall()

    def _watch(self, module: torch.nn.Module, args: Any) -> None:
        if isinstance(module, _Loss):
            if self.hook is not None:
                self.hook.register_loss(module)
                self.loss_modules += 1
            return
        if self.model is not None:
            if module is self.model:
                self._model_calls += 1
                if self._model_calls > _STEPS_TO_FIND_A_LOSS:
                    self._stop_watching_modules()
            return
        if not any(parameter.requires_grad for parameter in module.parameters()):
            return
        if get_hook() is not None:
            log.info("trainprobe: the script created its own hook; it is used as it is")
            self.uninstall()
            return
        hook = get_hook(create_if_not_exists=True)
        if hook is None:
            log.warning("trainprobe: no hook configuration file; the training runs without it")
            self.uninstall()
            return
        self.hook, self.model, self._model_calls = hook, module, 1
        target = unwrap(module)
        before = set(target._forward_pre_hooks)
        hook.register_module(module)
        if target is module:
            # PyTorch chose this call's pre-hooks before the hook registered its own: run the
            # new ones now, so that this forward is step 0 as it is for a script's own hook.
            for key, step_hook in list(module._forward_pre_hooks.items()):
                if key not in before:
                    step_hook(module, args)


_installed: AutoHook | None = None


def install() -> AutoHook:
    """Install the automatic hook into this process (once); returns it."""
    global _installed
    if _installed is None:
        _installed = AutoHook()
        _installed.install()
    return _installed
