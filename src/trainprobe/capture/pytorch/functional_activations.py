"""Activations called as functions (``F.relu(x)``, ``torch.tanh(x)``, ``x.sigmoid()``), seen on
save steps.

Such calls are not modules, so no module hook sees them. On a step that saves something, the
hook runs the registered model's forward inside ``FunctionalActivations``, a
``TorchFunctionMode`` that hands each relu, tanh or sigmoid call's input and output to the hook.
They are saved as if a module ``<Model>.<function>`` had made them (``Net.relu_input_0``,
``Net.relu_output_0``, then ``_1`` for the next call in the same step), and recorded as a module
of type ``torch.nn.functional.relu`` that is an ``nn.ReLU``, so the rule collections and the
activation rules find them as they find modules.

Cost: one Python call per torch function call, on save steps only; on
``benchmarks/hook_overhead.py``'s MLP the difference was within the measurement's noise. Other
steps pay nothing. A compiled model is left alone.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from trainprobe.storage.module_types_file import ModuleType

__all__ = ["FUNCTION_TYPES", "FunctionalActivations"]

_KINDS: dict[Any, str] = {
    F.relu: "relu",
    torch.relu: "relu",
    torch.Tensor.relu: "relu",
    torch.tanh: "tanh",
    torch.Tensor.tanh: "tanh",
    F.tanh: "tanh",
    torch.sigmoid: "sigmoid",
    torch.Tensor.sigmoid: "sigmoid",
    F.sigmoid: "sigmoid",
}

FUNCTION_TYPES = {
    "relu": ModuleType("torch.nn.functional.relu", "torch.nn.ReLU"),
    "tanh": ModuleType("torch.nn.functional.tanh", "torch.nn.Tanh"),
    "sigmoid": ModuleType("torch.nn.functional.sigmoid", "torch.nn.Sigmoid"),
}
"""The type each function is recorded as: its own name, and the module it acts as."""


_MODULES = (torch.nn.ReLU, torch.nn.ReLU6, torch.nn.Tanh, torch.nn.Sigmoid)
_FRAMES_UP = 6


def _inside_a_module() -> bool:
    """Whether the call comes from an activation module's forward (its hook sees it already)."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(_FRAMES_UP):
        if frame is None:
            return False
        if isinstance(frame.f_locals.get("self"), _MODULES):
            return True
        frame = frame.f_back
    return False


class FunctionalActivations(TorchFunctionMode):
    """Calls ``seen(kind, input, output)`` for each activation function called while active."""

    def __init__(self, seen: Callable[[str, Any, Any], None]) -> None:
        super().__init__()
        self.seen = seen
        self.active = False

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        output = func(*args, **(kwargs or {}))
        if torch.compiler.is_compiling():
            return output  # a compiled forward is left alone
        kind = _KINDS.get(func)
        if kind is not None and args and not _inside_a_module():
            self.seen(kind, args[0], output)
        return output

    def start(self) -> None:
        """Begin watching (the model's forward starts)."""
        if not self.active:
            self.__enter__()  # type: ignore[no-untyped-call]
            self.active = True

    def stop(self) -> None:
        """Stop watching (the forward ended, or never ended: a step starts)."""
        if self.active:
            self.active = False
            self.__exit__(None, None, None)  # type: ignore[no-untyped-call]
