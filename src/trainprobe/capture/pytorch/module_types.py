"""What each registered module is (``nn.ReLU``, ``nn.Tanh``, ...), recorded beside the tensors.

Rules find activations by what they are, not by what they are called: in
``nn.Sequential(nn.Linear(4, 8), nn.Tanh())`` the tanh's tensors are ``1_input_0`` and
``1_output_0``. The hook records every registered module's class when it is registered; the
writer thread writes them to ``module-types/<worker>.json`` (``trainprobe.storage``), and the
trial answers ``module_type(name)``.

The collections SageMaker's rules attach (``relu_output``, ``relu_input``) select the outputs
and inputs of ReLU modules by type too (``attach``), whatever the modules are named.
"""

from __future__ import annotations

import re

import torch

from trainprobe.capture.collections import CollectionKeys, CollectionSet
from trainprobe.capture.pytorch import naming
from trainprobe.storage.module_types_file import RELU_TYPES, ModuleType

__all__ = ["ModuleTypes", "module_type"]

_BY_TYPE = {
    CollectionKeys.RELU_OUTPUT: naming.OUTPUT_SUFFIX,
    CollectionKeys.RELU_INPUT: naming.INPUT_SUFFIX,
}


def _public_name(cls: type) -> str | None:
    """``torch.nn.<Name>`` when ``cls`` is that class of ``torch.nn``; else None."""
    return f"torch.nn.{cls.__name__}" if getattr(torch.nn, cls.__name__, None) is cls else None


def module_type(module: torch.nn.Module) -> ModuleType:
    """The class of ``module`` and the nearest ``torch.nn`` class it derives from."""
    cls = naming.model_class(module)
    own = _public_name(cls) or f"{cls.__module__}.{cls.__qualname__}"
    nn = None
    for base in cls.__mro__:
        if base is torch.nn.Module:
            break
        nn = _public_name(base)
        if nn is not None:
            break
    return ModuleType(own, nn)


class ModuleTypes:
    """The types of the modules registered so far, by the names their tensors carry."""

    def __init__(self) -> None:
        self.modules: dict[str, ModuleType] = {}
        self.unwritten = False
        self._attached: set[tuple[str, str]] = set()

    def add(self, name: str, module: torch.nn.Module) -> None:
        """Record the module that saves its tensors as ``name``."""
        self.modules[name] = module_type(module)
        self.unwritten = True

    def attach(self, collections: CollectionSet) -> None:
        """Have ``relu_output`` / ``relu_input`` (where the hook has them) hold the outputs /
        inputs of every ReLU module, whatever its name."""
        for collection in collections:
            suffix = _BY_TYPE.get(collection.name)
            if suffix is None:
                continue
            for name, found in self.modules.items():
                key = (collection.name, name)
                if key in self._attached or (found.nn or found.type) not in RELU_TYPES:
                    continue
                self._attached.add(key)
                if not collection.matches(f"{name}{suffix}0"):  # its name does not say ReLU
                    collection.include(f"^{re.escape(name + suffix)}\\d+$")
