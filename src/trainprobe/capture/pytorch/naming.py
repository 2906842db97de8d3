"""The names tensors are saved under, smdebug's PyTorch names.

- parameters: ``<TopModuleClass>_<parameter name>``, e.g. ``Net_fc1.weight``;
- their gradients: ``gradient/<the same>``;
- a module's outputs and inputs: ``<qualified module name>_output_<i>`` / ``_input_<i>``, the
  top module being named by its class (``Net_output_0``); ``i`` counts on within a step, so a
  module called twice in one forward gives ``_output_0`` then ``_output_1``;
- a loss module: ``<LossClass>_output_0``; values passed to ``record_tensor_value(name, ...)``:
  ``<name>_output_<i>``; scalars: ``scalar/<name>``.

Wrappers that do not change the model are looked through, so a model keeps its tensor names when
it is compiled (``torch.compile``) or wrapped for data parallelism: the names are those of the
module inside (``Net_fc1.weight``, not ``DistributedDataParallel_module.fc1.weight``).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from trainprobe.capture.collections import SCALAR_PREFIX

__all__ = [
    "GRADIENT_PREFIX",
    "INPUT_SUFFIX",
    "OUTPUT_SUFFIX",
    "SCALAR_PREFIX",
    "gradient_name",
    "module_tensors",
    "parameter_name",
    "unwrap",
]

GRADIENT_PREFIX = "gradient/"
INPUT_SUFFIX = "_input_"
OUTPUT_SUFFIX = "_output_"


def unwrap(module: torch.nn.Module) -> torch.nn.Module:
    """The model inside compile and data-parallel wrappers (the module itself if unwrapped)."""
    while True:
        inner = getattr(module, "_orig_mod", None)  # torch.compile's OptimizedModule
        if isinstance(inner, torch.nn.Module):
            module = inner
            continue
        wrapped = getattr(module, "module", None)
        parallel = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
        if isinstance(module, parallel) and isinstance(wrapped, torch.nn.Module):
            module = wrapped
            continue
        return module


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
