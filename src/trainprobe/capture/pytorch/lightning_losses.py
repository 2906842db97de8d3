"""The losses of a Lightning module's evaluation and test steps, as its steps return or log them.

A ``validation_step`` or ``test_step`` often computes its loss as a plain expression
(``self(batch).sum()``, a metric of its own): no ``torch.nn`` loss, no ``backward()``, nothing a
hook following the training would otherwise see. The user sees that value two ways, and so does
the hook: the step **returns** it (a tensor of one number, or a dict's ``"loss"``), and the step
**logs** it (``self.log("val_loss", loss)``, under a name with ``loss`` in it). Both reach the
step's losses (``training_losses.LossSource.RETURNED`` and ``LOGGED``), after any loss the step
computed the usual ways.

How: ``LightningModule.log`` is wrapped (Lightning's own class, once, restored by ``stop``), and a
callback of Lightning's kind is added to the trainer of each watched module (removed by
``stop``): its ``on_validation_batch_end`` and ``on_test_batch_end`` get what the step returned.
Nothing of Lightning is imported here: its classes are found from the module's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from trainprobe.capture.pytorch.training_losses import LossSource

__all__ = ["LightningLosses"]

LOSS_WORD = "loss"
"""A logged value is a loss when its name holds this word (``val_loss``, ``test_loss``)."""


def _lightning_module_class(cls: type) -> type | None:
    """Lightning's ``LightningModule`` among ``cls``'s bases, if ``cls`` is one."""
    for base in cls.__mro__:
        if base.__name__ == "LightningModule" and base.__module__.split(".")[0] in (
            "lightning",
            "pytorch_lightning",
        ):
            return base
    return None


def _one_number(value: object) -> torch.Tensor | None:
    if isinstance(value, dict):
        value = value.get(LOSS_WORD)
    if isinstance(value, torch.Tensor):
        return value if value.numel() == 1 and value.is_floating_point() else None
    if isinstance(value, float):
        return torch.tensor(value)
    return None


class LightningLosses:
    """Hands ``listener(source, loss)`` what a watched Lightning module's steps return (at the
    end of an evaluation or test batch) and log under a loss's name (see the module docstring).
    """

    def __init__(self, listener: Callable[[LossSource, torch.Tensor], None]) -> None:
        self._listener = listener
        self._modules: set[int] = set()
        self._trainers: dict[int, tuple[Any, Any]] = {}
        self._patched: list[tuple[type, Any]] = []

    def watch(self, model: torch.nn.Module) -> bool:
        """Watch ``model`` if it is a LightningModule; whether it is."""
        base = _lightning_module_class(type(model))
        if base is None:
            return False
        self._modules.add(id(model))
        if all(patched is not base for patched, _ in self._patched):
            original = base.log  # type: ignore[attr-defined]
            self._patched.append((base, original))
            heard = self._logged

            def log(module: Any, name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
                heard(module, name, value)
                return original(module, name, value, *args, **kwargs)

            base.log = log  # type: ignore[attr-defined]
        return True

    def follow(self, model: torch.nn.Module) -> None:
        """A step of ``model`` starts: hear its trainer's batch ends (a new trainer too)."""
        trainer = getattr(model, "_trainer", None)
        if trainer is None or id(trainer) in self._trainers:
            return
        callbacks = getattr(trainer, "callbacks", None)
        if not isinstance(callbacks, list):
            return
        callback = self._callback(type(model))
        callbacks.append(callback)
        self._trainers[id(trainer)] = (trainer, callback)

    def stop(self) -> None:
        """Restore ``LightningModule.log`` and take the callbacks out of their trainers."""
        for base, original in reversed(self._patched):
            base.log = original  # type: ignore[attr-defined]
        self._patched.clear()
        for trainer, callback in self._trainers.values():
            if callback in trainer.callbacks:
                trainer.callbacks.remove(callback)
        self._trainers.clear()

    def _logged(self, module: Any, name: object, value: object) -> None:
        if id(module) not in self._modules or not isinstance(name, str):
            return
        if LOSS_WORD in name.lower():
            loss = _one_number(value)
            if loss is not None:
                self._listener(LossSource.LOGGED, loss)

    def _returned(self, outputs: object) -> None:
        loss = _one_number(outputs)
        if loss is not None:
            self._listener(LossSource.RETURNED, loss)

    def _callback(self, module_class: type) -> Any:
        """A Lightning ``Callback`` whose evaluation and test batch ends hand on the step's
        result (of the Lightning package ``module_class`` comes from)."""
        base = _lightning_module_class(module_class)
        assert base is not None
        package = base.__module__.split(".")[0]
        root = "lightning.pytorch" if package == "lightning" else package
        callback_class: type = importlib.import_module(f"{root}.callbacks").Callback
        returned = self._returned

        class StepLosses(callback_class):  # type: ignore[misc,valid-type]
            """trainprobe: hears what each evaluation and test step returned."""

            def on_validation_batch_end(
                self, trainer: Any, module: Any, outputs: Any, *_: Any
            ) -> None:
                returned(outputs)

            def on_test_batch_end(self, trainer: Any, module: Any, outputs: Any, *_: Any) -> None:
                returned(outputs)

        return StepLosses()
