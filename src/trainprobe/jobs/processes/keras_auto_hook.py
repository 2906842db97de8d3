"""The hook, installed into a Keras training that does not install it itself.

As SageMaker's TensorFlow container hooks a plain script: once the script imports keras (directly
or through ``tf.keras``, which is Keras 3), ``keras.Model``'s ``fit``, ``evaluate`` and ``predict``
are wrapped so that each call gets the job's hook as one more callback:

- unless the call already has a trainprobe (or smdebug) Keras hook among its callbacks, as a
  script written for SageMaker Debugger passes its ``KerasHook``: that one is left in charge;
- the hook is made once, from the job's configuration file (``get_hook``); without one, nothing
  happens;
- evaluation inside ``fit`` (its validation) reuses ``fit``'s callbacks, hook included.

Nothing is imported before the script imports keras, so a job that never uses it pays nothing; a
Keras model on the PyTorch backend is left to this hook (the PyTorch one stands aside). Should
installing the hook fail, the failure is logged and the training goes on without it.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

from trainprobe.jobs.processes.patch_on_import import patch_when_imported

__all__ = ["install", "is_keras_object", "patch"]

log = logging.getLogger("trainprobe")

_PATCHED = "__trainprobe_hook__"
_METHODS = ("fit", "evaluate", "predict")


def is_keras_object(value: object) -> bool:
    """Whether ``value`` is an instance of a Keras class (a layer, a model), keras unimported."""
    return any(cls.__module__.startswith("keras.") for cls in type(value).__mro__)


def _is_a_hook(callback: object) -> bool:
    module = type(callback).__module__
    return module.startswith(("trainprobe.capture.keras", "smdebug.tensorflow"))


def _add_hook(arguments: inspect.BoundArguments) -> None:
    """Put the job's hook among the call's callbacks (see the module docstring)."""
    from trainprobe.capture.keras import get_hook

    callbacks = arguments.arguments.get("callbacks")
    listed = getattr(callbacks, "callbacks", callbacks)  # a CallbackList (fit's validation)
    if listed is not None and not isinstance(listed, (list, tuple)):
        listed = [listed]
    if listed is not None and any(_is_a_hook(callback) for callback in listed):
        return
    if callbacks is not None and hasattr(callbacks, "callbacks"):
        return  # Keras's own list, made by a call that had its chance to get the hook
    hook = get_hook(create_if_not_exists=True)
    if hook is None:
        return
    arguments.arguments["callbacks"] = [*(listed or ()), hook]


def _hooked(method: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(method)

    @functools.wraps(method)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        try:
            arguments = signature.bind(*args, **kwargs)
            _add_hook(arguments)
        except Exception as error:  # never the training's problem
            log.error(
                "trainprobe: installing the hook automatically failed (%s: %s); the training "
                "goes on without it",
                type(error).__name__,
                error,
            )
            return method(*args, **kwargs)
        return method(*arguments.args, **arguments.kwargs)

    setattr(hooked, _PATCHED, True)
    return hooked


def patch(keras: ModuleType) -> None:
    """Wrap ``keras.Model``'s ``fit``, ``evaluate`` and ``predict`` (once)."""
    model = getattr(keras, "Model", None)
    if model is None:
        return
    for name in _METHODS:
        original = getattr(model, name, None)
        if original is not None and not getattr(original, _PATCHED, False):
            setattr(model, name, _hooked(original))


def install() -> None:
    """Patch keras now if it is imported, else as soon as the script imports it."""
    patch_when_imported("keras", patch, "Keras")
