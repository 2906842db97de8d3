"""The hook, installed into a PyTorch training that does not install it itself.

SageMaker's framework containers hook a plain script without a line of trainprobe in it; this
module does the same for a job's training, from the job's hook configuration file. A global
module forward pre-hook waits for the first module called that has trainable parameters: the
model (the top-level module: its forward starts before its submodules'). If the script has
created a hook of its own by then, that hook is left in charge and nothing else happens.
Otherwise the hook is made from the configuration file (``get_hook``), set to follow the training
(``Hook.start_following_training``: a TRAIN step is an optimizer step, modes come from the
training, losses are found wherever they are computed), the model is registered with it, and the
step that call starts is counted as step 0. The global pre-hook then removes itself, so the
training pays nothing for it. Should installing the hook fail, the failure is logged and the
training goes on without it. A Keras model on the PyTorch backend is a module too: it belongs to
the Keras hook (``trainprobe.jobs.processes.keras_auto_hook``), so at its first call this one stands
aside for good, and stops watching the losses.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from trainprobe.capture.pytorch import Hook, get_hook
from trainprobe.capture.pytorch.naming import unwrap
from trainprobe.capture.pytorch.training_losses import loss_watch
from trainprobe.capture.pytorch.training_steps import optimizer_steps
from trainprobe.jobs.processes.keras_auto_hook import is_keras_object

__all__ = ["AutoHook", "install"]

log = logging.getLogger("trainprobe")


class AutoHook:
    """Installs the hook into the first model the training calls (see the module docstring)."""

    def __init__(self) -> None:
        self.hook: Hook | None = None
        self.model: torch.nn.Module | None = None
        self._handle: Any = None

    def install(self) -> None:
        """Start watching the training's module calls, and its losses and optimizer steps for
        the hook to come."""
        loss_watch()
        optimizer_steps()
        self._handle = torch.nn.modules.module.register_module_forward_pre_hook(
            self._on_forward_pre
        )

    def uninstall(self) -> None:
        """Stop watching (the hook, if one was made, stays)."""
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
        if is_keras_object(module):
            self.uninstall()
            loss_watch().stop()
            return
        if not any(parameter.requires_grad for parameter in module.parameters()):
            return
        self.uninstall()
        if get_hook() is not None:
            log.info("trainprobe: the script created its own hook; it is used as it is")
            return
        hook = get_hook(create_if_not_exists=True)
        if hook is None:
            log.warning("trainprobe: no hook configuration file; the training runs without it")
            return
        self.hook, self.model = hook, module
        hook.start_following_training()
        target = unwrap(module)
        before = set(target._forward_pre_hooks)
        hook.register_module(module)
        if target is module:
            # PyTorch chose this call's pre-hooks before the hook registered its own: run the
            # new ones now, so that this forward is step 0 as it is for a script's own hook.
            for key, step_hook in list(module._forward_pre_hooks.items()):
                if key not in before:
                    if key in module._forward_pre_hooks_with_kwargs:
                        step_hook(module, args, {})
                    else:
                        step_hook(module, args)


_installed: AutoHook | None = None


def install() -> AutoHook:
    """Install the automatic hook into this process (once); returns it."""
    global _installed
    if _installed is None:
        _installed = AutoHook()
        _installed.install()
    return _installed
