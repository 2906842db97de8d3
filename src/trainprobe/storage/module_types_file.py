"""The class of every module the hook registered, one file per worker, beside the tensors.

::

    <out_dir>/module-types/<worker>.json
    {"version": 1, "worker": "worker_0",
     "modules": {"body.1": {"type": "torch.nn.Tanh", "nn": "torch.nn.Tanh"}, ...}}

``type`` is the module's own class (``torch.nn.Tanh``, or ``mypackage.MyBlock`` for a class of
the user's); ``nn`` is the nearest ``torch.nn`` class it derives from (None when there is
none), so a user's ``class MyTanh(nn.Tanh)`` is still known as a tanh. smdebug reads only
``collections/``, ``index/`` and ``events/``: it ignores this directory, so the output stays
readable by it. A file that cannot be read is skipped with a warning: a rule that needs types
then falls back to names.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from trainprobe.storage import files

__all__ = [
    "ACTIVATION_TYPES",
    "MODULE_TYPES_DIR",
    "RELU_TYPES",
    "SIGMOID_TYPES",
    "TANH_TYPES",
    "ModuleType",
    "read_module_types",
    "write_module_types",
]

log = logging.getLogger(__name__)

MODULE_TYPES_DIR = "module-types"

RELU_TYPES = frozenset({"torch.nn.ReLU", "torch.nn.ReLU6"})
"""Modules whose units can die: the ``relu_output``/``relu_input`` collections and DeadRelu."""
TANH_TYPES = frozenset({"torch.nn.Tanh"})
SIGMOID_TYPES = frozenset({"torch.nn.Sigmoid"})
ACTIVATION_TYPES = (
    RELU_TYPES
    | TANH_TYPES
    | SIGMOID_TYPES
    | frozenset(
        "torch.nn." + name
        for name in [
            "LeakyReLU",
            "PReLU",
            "RReLU",
            "ELU",
            "SELU",
            "CELU",
            "GELU",
            "SiLU",
            "Mish",
            "Softplus",
            "Hardtanh",
            "Hardswish",
            "Hardsigmoid",
            "LogSigmoid",
            "Softsign",
            "Tanhshrink",
        ]
    )
)
"""Element-wise activation functions (PoorWeightInitialization compares their inputs)."""
_VERSION = 1
_SUFFIX = ".json"


@dataclass(frozen=True)
class ModuleType:
    """A module's class (``type``) and the ``torch.nn`` class it is (``nn``), by name."""

    type: str
    nn: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The entry as the file holds it."""
        return {"type": self.type, "nn": self.nn}


def write_module_types(out_dir: str, worker: str, modules: dict[str, ModuleType]) -> int:
    """Write ``worker``'s module types (replacing its file atomically); returns the bytes."""
    data = {
        "version": _VERSION,
        "worker": worker,
        "modules": {name: entry.to_json() for name, entry in modules.items()},
    }
    path = f"{out_dir.rstrip('/')}/{MODULE_TYPES_DIR}/{worker}{_SUFFIX}"
    return files.write_atomic(path, json.dumps(data, separators=(",", ":")).encode())


def read_module_types(out_dir: str) -> dict[str, ModuleType]:
    """Every worker's module types merged, by module name (empty when there are none)."""
    directory = f"{out_dir.rstrip('/')}/{MODULE_TYPES_DIR}"
    found: dict[str, ModuleType] = {}
    if not files.is_dir(directory):
        return found
    for name in files.list_files(directory, _SUFFIX):
        path = f"{directory}/{name}"
        try:
            data = json.loads(files.read_bytes(path))
            for module, entry in data["modules"].items():
                nn = entry.get("nn")
                found[str(module)] = ModuleType(str(entry["type"]), None if nn is None else str(nn))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            log.warning("trainprobe: skipping %s, not a module-types file: %s", path, error)
    return found
