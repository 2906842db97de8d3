"""The names tensors are saved under, smdebug's PyTorch names.

- parameters: ``<TopModuleClass>_<parameter name>``, e.g. ``Net_fc1.weight``;
- their gradients: ``gradient/<the same>``;
- a module's outputs and inputs: ``<qualified module name>_output_<i>`` / ``_input_<i>``, the
  top module being named by its class (``Net_output_0``); ``i`` counts on within a step, so a
  module called twice in one forward gives ``_output_0`` then ``_output_1``;
- a loss module: ``<LossClass>_output_0``; values passed to ``record_tensor_value(name, ...)``:
  ``<name>_output_<i>``; scalars: ``scalar/<name>``.

Wrappers that do not change the model are looked through, so a model keeps its tensor names when
it is compiled (``torch.compile``), wrapped for data parallelism or sharded: the names are those
of the module inside (``Net_fc1.weight``, not ``DistributedDataParallel_module.fc1.weight``);
FSDP2's ``fully_shard`` changes a module's class into ``FSDP<Class>``, named here by the class
the model defined (``model_class``); FSDP1 (``FullyShardedDataParallel``) and activation
checkpointing wrap modules, whose wrapping levels leave the names (``clean_name``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import torch

from trainprobe.capture.collections import SCALAR_PREFIX

__all__ = [
    "GRADIENT_PREFIX",
    "INPUT_SUFFIX",
    "OUTPUT_SUFFIX",
    "SCALAR_PREFIX",
    "clean_name",
    "gradient_name",
    "is_wrapping_level",
    "model_class",
    "module_tensors",
    "parameter_name",
    "unwrap",
]

GRADIENT_PREFIX = "gradient/"
INPUT_SUFFIX = "_input_"
OUTPUT_SUFFIX = "_output_"

_WRAPPING_LEVELS = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")
"""The names wrappers put between a model's modules (FSDP1, checkpointing, torch.compile)."""


def _fsdp() -> Any:
    """``torch.distributed.fsdp`` once the training has imported it (no module is sharded by
    it before)."""
    return sys.modules.get("torch.distributed.fsdp")


def unwrap(module: torch.nn.Module) -> torch.nn.Module:
    """The model inside compile and data-parallel wrappers (the module itself if unwrapped)."""
    while True:
        inner = getattr(module, "_orig_mod", None)  # torch.compile's OptimizedModule
        if isinstance(inner, torch.nn.Module):
            module = inner
            continue
        wrapped = getattr(module, "module", None)
        fsdp = _fsdp()
        parallel = (
            torch.nn.parallel.DistributedDataParallel,
            torch.nn.DataParallel,
            *(() if fsdp is None else (fsdp.FullyShardedDataParallel,)),
        )
        if isinstance(module, parallel) and isinstance(wrapped, torch.nn.Module):
            module = wrapped
            continue
        return module


def model_class(module: torch.nn.Module) -> type[torch.nn.Module]:
    """The class ``module`` was defined with: for a module FSDP2 sharded (whose class it made
    ``FSDP<Class>``), that ``Class``."""
    kind = type(module)
    fsdp = _fsdp()
    if fsdp is not None and isinstance(module, fsdp.FSDPModule):
        for base in kind.__mro__[1:]:
            if not issubclass(base, fsdp.FSDPModule) and issubclass(base, torch.nn.Module):
                return base  # type: ignore[no-any-return]
    return kind


def clean_name(qualified: str) -> str:
    """A module's or parameter's qualified name without the levels wrappers added
    (``layers.0._fsdp_wrapped_module.fc.weight`` is ``layers.0.fc.weight``)."""
    if "_" in qualified:
        for level in _WRAPPING_LEVELS:
            qualified = qualified.replace(level, "")
    return qualified


def is_wrapping_level(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a wrapper inside a model (an FSDP1 unit, a checkpoint wrapper),
    whose module inside takes its name."""
    return any(level[:-1] in module._modules for level in _WRAPPING_LEVELS)


def parameter_name(top_class: str, name: str) -> str:
    """The saved name of parameter ``name`` of a top module of class ``top_class``."""
    return f"{top_class}_{name}"


def gradient_name(parameter: str) -> str:
    """The saved name of a parameter's gradient."""
    return GRADIENT_PREFIX + parameter


def module_tensors(value: object) -> Iterator[torch.Tensor]:
    """The tensors of a module's inputs or outputs, in order, through nested tuples and lists."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from module_tensors(item)
