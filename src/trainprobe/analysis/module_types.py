"""Which module saved a tensor, and what class that module is (``trial.module_type``).

The PyTorch hook records each registered module's class beside the tensors
(``module-types/<worker>.json``); a tensor ``<module>_input_<i>`` or ``<module>_output_<i>``
belongs to ``<module>``. Output written by smdebug has no such file: every type is then unknown
and rules fall back to tensor names.
"""

from __future__ import annotations

import re
import time

from trainprobe.storage.module_types_file import ModuleType, read_module_types

__all__ = ["ModuleTypeIndex", "module_of"]

_MODULE_TENSOR = re.compile(r"^(?P<module>.+)_(?:input|output)_\d+$")
_REREAD_SECONDS = 1.0


def module_of(name: str) -> str:
    """The module a tensor belongs to (``body.1`` for ``body.1_output_0``); ``name`` itself
    when it is not a module's input or output (it may be a module's name)."""
    found = _MODULE_TENSOR.match(name)
    return found.group("module") if found else name


class ModuleTypeIndex:
    """The module types of one trial, read when first asked and again (at most once a second)
    when asked about a module not known yet while the job may still register modules."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._types: dict[str, ModuleType] | None = None
        self._read_at = 0.0

    def get(self, name: str, job_ended: bool) -> ModuleType | None:
        """The type of the module ``name`` or of the module a tensor ``name`` belongs to."""
        module = module_of(name)
        found = self._load(force=False).get(module)
        if found is None and not job_ended and time.monotonic() - self._read_at > _REREAD_SECONDS:
            found = self._load(force=True).get(module)
        return found

    def all(self) -> dict[str, ModuleType]:
        """Every module's type, by module name."""
        return dict(self._load(force=self._types is None))

    def _load(self, force: bool) -> dict[str, ModuleType]:
        if self._types is None or force:
            self._types = read_module_types(self.path)
            self._read_at = time.monotonic()
        return self._types
