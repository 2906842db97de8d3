"""trainprobe's forward hooks on a user's modules, kept out of what the user does with the module.

The hook and the framework profiler see a model's forward through PyTorch's module hooks, which
live in the module's own dictionaries (``_forward_pre_hooks``, ``_forward_hooks`` and their
companions). Left there as they are, they would travel with the module: ``torch.save(model, f)``,
``pickle`` and ``copy.deepcopy`` would try to pickle trainprobe's closures (and fail, or carry
trainprobe into a process that does not have it), ``torch.jit.script`` would try to compile them,
and ``torch.export`` and ``torch.jit.trace`` would run them as part of the model.

A hook attached here stays out of each of these, and the module behaves as it does without
trainprobe:

- **pickling and copying** (``torch.save``, ``pickle``, ``copy.deepcopy``, ``multiprocessing``):
  the module's class gets a reducer in ``copyreg``'s dispatch table that reduces the module as
  PyTorch does and leaves trainprobe's entries out of its hook dictionaries; the copy or the
  loaded module has the user's hooks only, and loads where trainprobe is not installed;
- **TorchScript** (``torch.jit.script``, and the module a trace builds): trainprobe's hooks are
  set aside while the script module is built (``torch.jit._recursive.create_script_module``),
  then put back where they were;
- **export and tracing** (``torch.export``, ``torch.jit.trace``): the hooks do nothing while the
  model is being exported or traced.

The user's own hooks and their handles are untouched.
"""

from __future__ import annotations

import contextlib
import copyreg
import functools
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["ModuleHookHandle", "attach_forward_hook", "attach_forward_pre_hook"]

_HOOK_DICTS = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
)
"""The module attributes that hold forward hooks, or mark them, by handle id."""

_PICKLE_PROTOCOL = 2
"""The protocol a module is reduced with for ``copyreg`` (the lowest with ``__newobj__``)."""

_ours: set[int] = set()
"""The handle ids of every hook attached here and not removed yet (unique in a process)."""

_script_patched = False


class ModuleHookHandle:
    """Removes a hook attached with ``attach_forward_pre_hook`` or ``attach_forward_hook``."""

    def __init__(self, handle: torch.utils.hooks.RemovableHandle) -> None:
        self._handle = handle
        self.id = handle.id

    def remove(self) -> None:
        """Remove the hook (once; again does nothing)."""
        self._handle.remove()
        _ours.discard(self.id)


def attach_forward_pre_hook(
    module: torch.nn.Module,
    hook: Callable[..., Any],
    *,
    with_kwargs: bool = False,
    prepend: bool = False,
) -> ModuleHookHandle:
    """``module.register_forward_pre_hook(hook, ...)``, kept out of copies, pickles, scripts
    and exports (see the module docstring)."""

    def forward_pre_hook(*args: Any) -> Any:
        if _set_aside():
            return None
        return hook(*args)

    handle = module.register_forward_pre_hook(
        forward_pre_hook, with_kwargs=with_kwargs, prepend=prepend
    )
    return _own(module, handle)


def attach_forward_hook(
    module: torch.nn.Module, hook: Callable[..., Any], *, prepend: bool = False
) -> ModuleHookHandle:
    """``module.register_forward_hook(hook, ...)``, kept out of copies, pickles, scripts and
    exports (see the module docstring)."""

    def forward_hook(*args: Any) -> Any:
        if _set_aside():
            return None
        return hook(*args)

    handle = module.register_forward_hook(forward_hook, prepend=prepend)
    return _own(module, handle)


def _set_aside() -> bool:
    """Whether the model is being exported or traced: trainprobe's hooks stand aside."""
    return torch.compiler.is_exporting() or torch._C._is_tracing()


def _own(module: torch.nn.Module, handle: torch.utils.hooks.RemovableHandle) -> ModuleHookHandle:
    _ours.add(handle.id)
    _reduce_without_ours(type(module))
    _script_without_ours()
    return ModuleHookHandle(handle)


# ----- pickling and copying -----


def _reduce_without_ours(cls: type[torch.nn.Module]) -> None:
    """Have ``cls`` pickled and copied without trainprobe's hooks (once per class)."""
    existing = copyreg.dispatch_table.get(cls)
    if getattr(existing, "trainprobe_reducer", False):
        return
    reducer = _reducer(existing)
    reducer.trainprobe_reducer = True  # type: ignore[attr-defined]
    copyreg.pickle(cls, reducer)


def _reducer(existing: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """A reducer that reduces a module as ``existing`` (else the module itself) would, with
    trainprobe's entries left out of its hook dictionaries."""

    def reduce_module(module: Any) -> Any:
        reduced = existing(module) if existing is not None else None
        if reduced is None:
            reduced = module.__reduce_ex__(_PICKLE_PROTOCOL)
        if not isinstance(reduced, tuple) or len(reduced) < 3:
            return reduced
        state = reduced[2]
        if isinstance(state, dict):
            state = _without_ours(state)
        elif isinstance(state, tuple) and state and isinstance(state[0], dict):
            state = (_without_ours(state[0]), *state[1:])
        return (*reduced[:2], state, *reduced[3:])

    return reduce_module


def _without_ours(state: dict[str, Any]) -> dict[str, Any]:
    """A module's state (its ``__dict__`` as pickled) with trainprobe's hooks left out."""
    if not _ours:
        return state
    kept = dict(state)
    for name in _HOOK_DICTS:
        hooks = state.get(name)
        if isinstance(hooks, dict) and not _ours.isdisjoint(hooks):
            kept[name] = OrderedDict(
                (key, value) for key, value in hooks.items() if key not in _ours
            )
    return kept


# ----- TorchScript -----


def _script_without_ours() -> None:
    """Have TorchScript build script modules with trainprobe's hooks set aside (once)."""
    global _script_patched
    if _script_patched:
        return
    _script_patched = True
    recursive = torch.jit._recursive
    original = recursive.create_script_module

    @functools.wraps(original)
    def create_script_module(nn_module: Any, *args: Any, **kwargs: Any) -> Any:
        with _hidden(nn_module):
            return original(nn_module, *args, **kwargs)  # type: ignore[no-untyped-call]

    recursive.create_script_module = create_script_module


@contextlib.contextmanager
def _hidden(root: Any) -> Iterator[None]:
    """trainprobe's hooks taken out of every module under ``root``, then put back in order."""
    emptied: list[tuple[dict[int, Any], list[tuple[int, Any]]]] = []
    if _ours and isinstance(root, torch.nn.Module):
        for module in root.modules():
            for name in _HOOK_DICTS:
                hooks = module.__dict__.get(name)
                if isinstance(hooks, dict) and not _ours.isdisjoint(hooks):
                    emptied.append((hooks, list(hooks.items())))
                    for key in [key for key in hooks if key in _ours]:
                        del hooks[key]
    try:
        yield
    finally:
        for hooks, items in emptied:
            # The same dictionaries, refilled: the user's handles still point at them.
            hooks.clear()
            hooks.update(items)
