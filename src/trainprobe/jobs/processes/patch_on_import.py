"""Patch a framework's module in a training process, now or as soon as the script imports it.

The automatic hooks (Keras, XGBoost) change a framework's functions before the user's script
calls them, without importing the framework themselves: a script that never uses it pays
nothing. ``patch_when_imported`` patches the module at once when it is imported already, and
otherwise puts a finder first on ``sys.meta_path`` that patches it right after its import ran.
A patch that fails is logged once; the script runs on unhooked.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

__all__ = ["patch_when_imported"]

log = logging.getLogger("trainprobe")


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches module ``name`` with ``patch`` right after the script imports it."""

    def __init__(self, name: str, patch: Callable[[ModuleType], None], hook: str) -> None:
        self.name, self.patch, self.hook = name, patch, hook

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            try:
                self.patch(module)
            except Exception as error:
                log.error("trainprobe: the %s hook could not be installed (%s)", self.hook, error)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def patch_when_imported(name: str, patch: Callable[[ModuleType], None], hook: str) -> None:
    """Patch module ``name`` with ``patch`` now if it is imported, else as soon as the script
    imports it (once: a second call adds no second finder); ``hook`` names it in messages."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
    elif not any(
        isinstance(finder, _PatchOnImport) and finder.name == name for finder in sys.meta_path
    ):
        sys.meta_path.insert(0, _PatchOnImport(name, patch, hook))
