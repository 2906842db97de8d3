"""The loss of each step, found wherever the training computes it, as the user sees it.

A hook that follows the training (``Hook(follow_training=True)``, as under ``trainprobe run``)
does not wait for ``register_loss``. In a step, the loss may come from six places, and the
first of them that the step has is its loss:

1. **a model's output**: the ``loss`` of what the model returned (Hugging Face's outputs, a dict);
2. **a loss module**: any ``torch.nn`` loss called, even one created inside ``forward`` each call;
3. **a loss function**: ``torch.nn.functional``'s (``cross_entropy``, ``mse_loss``, ...);
4. **the tensor ``backward()`` was called on**, for a loss computed any other way;
5. **what a Lightning step returned**, 6. **or logged under a loss's name**: an evaluation or test
   step's loss computed as a plain expression (``lightning_losses``).

Each is taken before a script scales it for gradient accumulation (a loss divided by the number of
micro-batches, or ``accelerator.backward``'s division), except the last, which only ``backward``
sees. A step of several micro-batches saves their mean, or their sum where each is a part of the
step's loss (a Hugging Face model given ``num_items_in_batch`` divides by the whole step's token
count). A loss module is saved under its class's name (``CrossEntropyLoss_output_0``), the
others as ``loss_output_0``: both in the ``losses`` collection.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import IntEnum
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.modules.loss import _Loss

__all__ = ["LOSS_NAME", "LossSource", "StepLosses", "TrainingLosses", "loss_watch", "output_loss"]

LOSS_NAME = "loss"
"""The name of a loss that no loss module computed: saved as ``loss_output_0``."""

LOSS_FUNCTIONS = (
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "mse_loss",
    "nll_loss",
    "smooth_l1_loss",
)
"""The ``torch.nn.functional`` losses watched."""


class LossSource(IntEnum):
    """Where a step's loss was found; a lower value wins."""

    OUTPUT = 0
    MODULE = 1
    FUNCTION = 2
    BACKWARD = 3
    RETURNED = 4
    LOGGED = 5


def output_loss(outputs: object) -> torch.Tensor | None:
    """The ``loss`` a model returned (an attribute, or a mapping's key), if it is one number."""
    loss = outputs.get("loss") if isinstance(outputs, dict) else getattr(outputs, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss
    return None


class StepLosses:
    """The losses seen in the step in progress, by source and name."""

    def __init__(self) -> None:
        self._found: dict[LossSource, dict[str, list[torch.Tensor]]] = {}
        self.partial = False
        """Whether each micro-batch's loss is a part of the step's (their sum is the loss)."""
        self.complete = False
        """Whether the step's loss is known and later losses of the step are not part of it:
        an optimizer's closure was evaluated once, and ``step()`` returns that evaluation's
        loss (L-BFGS evaluates it again at other weights)."""

    def add(
        self, source: LossSource, name: str, loss: torch.Tensor, *, first_only: bool = False
    ) -> None:
        """Note a loss of the step. ``first_only``: the step is one forward (EVAL, PREDICT);
        a loss of a name it already has came from elsewhere (a model the hook does not follow,
        run after the step's own) and is not part of it."""
        if self.complete:
            return
        found = self._found.setdefault(source, {})
        if first_only and name in found:
            return
        found.setdefault(name, []).append(loss.detach())

    def has(self, source: LossSource) -> bool:
        """Whether a loss from ``source`` or a better one was seen in this step."""
        return any(found <= source for found in self._found)

    def peek(self) -> torch.Tensor | None:
        """The step's loss so far (its best source's first), leaving the step as it is."""
        if not self._found:
            return None
        best = self._found[min(self._found)]
        return _combined(next(iter(best.values())), self.partial)

    def take(self) -> list[tuple[str, torch.Tensor]]:
        """The step's losses (name, value) from its best source; the step starts over."""
        found, self._found = self._found, {}
        partial, self.partial = self.partial, False
        self.complete = False
        if not found:
            return []
        best = found[min(found)]
        return [(name, _combined(values, partial)) for name, values in best.items()]


def _combined(values: list[torch.Tensor], partial: bool) -> torch.Tensor:
    if len(values) == 1:
        return values[0]
    stacked = torch.stack([value.reshape(()).float() for value in values])
    return stacked.sum() if partial else stacked.mean()


class TrainingLosses:
    """Watches the process's loss modules, loss functions and backward passes, and hands each
    loss to its ``listener(source, name, loss[, module])`` (see the module docstring).

    ``start`` patches ``torch.nn``'s loss classes, ``torch.nn.functional``'s losses and
    ``torch.Tensor.backward``; ``stop`` restores them. A script looks up ``F.cross_entropy``
    before it calls the model, so a watch started at the model's first forward would miss the
    first loss: the automatic hook starts the process's watch (``loss_watch``) before the script
    runs.
    """

    def __init__(self) -> None:
        self.listener: Callable[..., None] | None = None
        self.backward_ended: Callable[[], None] | None = None
        """Called when a ``backward()`` the watch saw has returned: the gradients it computed
        are in ``.grad``."""
        self._inside_loss_module = 0
        self._originals: list[tuple[object, str, Any]] = []

    def start(self) -> None:
        """Start watching (once)."""
        if self._originals:
            return
        self._patch(_Loss, "__call__", self._loss_module_call)
        for name in LOSS_FUNCTIONS:
            self._patch(F, name, self._loss_function)
        self._patch(torch.Tensor, "backward", self._backward)

    def stop(self) -> None:
        """Restore what ``start`` patched."""
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)
        self._originals.clear()

    def _patch(self, owner: object, name: str, wrapper: Callable[..., Any]) -> None:
        original = getattr(owner, name)
        self._originals.append((owner, name, original))
        setattr(owner, name, _wrapped(wrapper, original))

    def _loss_module_call(self, original: Any, module: Any, *args: Any, **kwargs: Any) -> Any:
        self._inside_loss_module += 1
        try:
            loss = original(module, *args, **kwargs)
        finally:
            self._inside_loss_module -= 1
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            self._report(LossSource.MODULE, type(module).__name__, loss, module)
        return loss

    def _loss_function(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        loss = original(*args, **kwargs)
        if self._inside_loss_module == 0 and isinstance(loss, torch.Tensor) and loss.numel() == 1:
            self._report(LossSource.FUNCTION, LOSS_NAME, loss)
        return loss

    def _backward(self, original: Any, tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if tensor.numel() == 1:
            self._report(LossSource.BACKWARD, LOSS_NAME, tensor)
        result = original(tensor, *args, **kwargs)
        ended = self.backward_ended
        if ended is not None:
            ended()
        return result

    def _report(self, *loss: Any) -> None:
        listener = self.listener
        if listener is not None:
            listener(*loss)


_watch: TrainingLosses | None = None


def loss_watch() -> TrainingLosses:
    """The process's watch of its losses, started on first use."""
    global _watch
    if _watch is None:
        _watch = TrainingLosses()
        _watch.start()
    return _watch


def _wrapped(wrapper: Callable[..., Any], original: Any) -> Callable[..., Any]:
    """``original`` called through ``wrapper(original, ...)``; a method still binds its instance
    (``functools.partial`` would not)."""

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        return wrapper(original, *args, **kwargs)

    return call
