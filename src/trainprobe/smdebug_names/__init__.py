"""smdebug's module names, answered by trainprobe: ``import smdebug.pytorch as smd`` works as is.

Code written for SageMaker Debugger imports ``smdebug``. Inside what trainprobe runs (a job's
training script, its rule processes, a custom rule file) these names are on already; anywhere else
(a notebook, a plain script) one line turns them on::

    import trainprobe.smdebug_names; trainprobe.smdebug_names.install()

After that, ``import smdebug.X.Y`` imports ``trainprobe.smdebug_names.smdebug.X.Y``: a package
laid out as smdebug's is, whose modules hold trainprobe's counterparts of smdebug's names (the
same objects as under ``trainprobe.*``). Nothing named ``smdebug`` is written anywhere: a finder
on ``sys.meta_path`` answers the imports, and ``uninstall()`` takes it away again.

- A real smdebug the user installed is never shadowed: ``install()`` then does nothing and says
  so in a log line (and returns False).
- ``smdebug.mxnet`` raises ImportError saying that trainprobe deliberately has no such hook;
  ``smdebug.xgboost`` is ``trainprobe.xgboost``; ``smdebug.tensorflow`` answers with the Keras
  hook (importing it imports keras).
- A module of smdebug's that has no counterpart here (its internals, ``smdebug.core.utils``)
  raises ModuleNotFoundError naming it.
- The names follow into the processes this one starts with ``multiprocessing`` (and
  ``torch.multiprocessing``) under the spawn and forkserver methods, as an installed smdebug
  would be there: such a child imports the parent's modules afresh, and a module that imports
  ``smdebug`` at its top (smdebug's own distributed tests do) would otherwise fail to load.
  Forked children inherit the names with the rest of the process.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import multiprocessing.process
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = ["ABSENT", "MIRROR", "SmdebugNames", "install", "installed", "uninstall"]

log = logging.getLogger("trainprobe")

MIRROR = __name__ + ".smdebug"
"""The package that answers for ``smdebug``: ``smdebug.X`` is ``MIRROR + ".X"``."""

_DIRECT = {"smdebug.xgboost": "trainprobe.xgboost"}
"""smdebug modules answered by a trainprobe module of another place."""

ABSENT = {
    "smdebug.mxnet": "MXNet",
}
"""The frameworks trainprobe deliberately has no hook for."""


class _Alias(importlib.abc.Loader):
    """Loads ``smdebug.X`` as the trainprobe module that answers for it (the same object)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a throwaway module: exec_module puts the real one in its place

    def exec_module(self, module: ModuleType) -> None:
        # The import system returns whatever sys.modules holds under the name once this returns,
        # so the alias is trainprobe's module itself, its own __spec__ untouched.
        sys.modules[module.__name__] = importlib.import_module(self.target)


class _Refusal(importlib.abc.Loader):
    """Raises the ImportError that says why a name of smdebug's is not here."""

    def __init__(self, message: str) -> None:
        self.message = message

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        raise ModuleNotFoundError(self.message, name=spec.name)

    def exec_module(self, module: ModuleType) -> None:  # pragma: no cover (never reached)
        raise ModuleNotFoundError(self.message, name=module.__name__)


def _target(fullname: str) -> str:
    for name, target in _DIRECT.items():
        if fullname == name or fullname.startswith(name + "."):
            return target + fullname[len(name) :]
    return MIRROR + fullname[len("smdebug") :]


def _absence(fullname: str) -> str | None:
    for name, framework in ABSENT.items():
        if fullname == name or fullname.startswith(name + "."):
            return (
                f"No module named {fullname!r}: trainprobe answers smdebug's names for PyTorch, "
                f"Keras and XGBoost, and deliberately has no {framework} hook"
            )
    return None


class SmdebugNames(importlib.abc.MetaPathFinder):
    """The ``sys.meta_path`` finder that answers ``import smdebug...`` with trainprobe."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "smdebug" and not fullname.startswith("smdebug."):
            return None
        absence = _absence(fullname)
        if absence is not None:
            return importlib.machinery.ModuleSpec(fullname, _Refusal(absence))
        answer = _target(fullname)
        try:
            found = importlib.util.find_spec(answer)
        except ModuleNotFoundError:
            found = None
        if found is None:
            message = (
                f"No module named {fullname!r}: trainprobe answers smdebug's documented names "
                "(smdebug.pytorch, trials, rules, modes, exceptions, the profiler analysis), "
                "not its internals"
            )
            return importlib.machinery.ModuleSpec(fullname, _Refusal(message))
        spec = importlib.machinery.ModuleSpec(
            fullname, _Alias(answer), is_package=found.submodule_search_locations is not None
        )
        return spec


_CHILDREN_KEY = "trainprobe_smdebug_names"
"""The entry of a process's multiprocessing configuration that carries the names to children."""


class _InChildren:
    """Carried in the configuration every new ``multiprocessing`` process gets a copy of: a
    spawned child unpickles that copy (before the function it runs, and so before that
    function's module) and the unpickling turns the names on there."""

    def __init__(self, by: str) -> None:
        self.by = by

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (_install_in_child, (self.by,))


def _install_in_child(by: str) -> _InChildren:
    install(by=f"a process started by {by}")
    return _InChildren(by)


def _configuration() -> dict[str, object]:
    """This process's multiprocessing configuration, copied into each process it starts."""
    config: dict[str, object] = multiprocessing.process.current_process()._config  # type: ignore[attr-defined]
    return config


def installed() -> bool:
    """Whether ``import smdebug`` is answered by trainprobe in this process."""
    return any(isinstance(finder, SmdebugNames) for finder in sys.meta_path)


def _real_smdebug() -> str | None:
    """Where a real smdebug is installed, or None."""
    for finder in sys.meta_path:
        if isinstance(finder, SmdebugNames):
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find("smdebug", None)
        if spec is not None:
            return spec.origin or str(list(spec.submodule_search_locations or []))
    return None


def install(*, by: str = "the user") -> bool:
    """Answer ``import smdebug...`` with trainprobe from now on in this process.

    Returns True when the names are on (or already were), False when a real smdebug is
    installed: it is never shadowed, and a log line says so. ``by`` says who asked, for that
    line.
    """
    if installed():
        return True
    module = sys.modules.get("smdebug")
    real = _real_smdebug() if module is None else getattr(module, "__file__", None)
    if real is not None:
        log.info(
            "trainprobe: smdebug is installed (%s); `import smdebug` stays smdebug's, not "
            "trainprobe's (asked by %s)",
            real,
            by,
        )
        return False
    sys.meta_path.insert(0, SmdebugNames())
    _configuration()[_CHILDREN_KEY] = _InChildren(by)
    return True


def uninstall() -> None:
    """Stop answering ``import smdebug``, and forget the smdebug modules imported so far."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, SmdebugNames)]
    _configuration().pop(_CHILDREN_KEY, None)
    for name in [n for n in sys.modules if n == "smdebug" or n.startswith("smdebug.")]:
        del sys.modules[name]
