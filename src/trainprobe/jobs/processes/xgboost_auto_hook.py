"""The hook, installed into an XGBoost training that does not install it itself.

As SageMaker's XGBoost container does, from the job's hook configuration file: once the script
imports xgboost, ``xgboost.train`` (which the scikit-learn API's ``fit`` calls too) is wrapped so
that every training gets the hook as one more callback:

- unless the training already has a trainprobe (or smdebug) hook among its callbacks, or the
  script has created one of its own: then that one is left in charge;
- the hook is made from the configuration file (``get_hook``); without one, nothing happens;
- it predicts on the last evaluation set that is not the training data (``evals``, or
  ``eval_set`` under ``fit``) and computes SHAP values on the training data, if its collections
  ask for them;
- its hyperparameters are the job's HyperParameters (``$SM_HPS``), else the training's params
  that are set.

Nothing is imported before the script imports xgboost, so a job that never uses it pays nothing.
Should installing the hook fail, the failure is logged and the training goes on without it.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from trainprobe import settings
from trainprobe.jobs.processes.patch_on_import import patch_when_imported

__all__ = ["install"]

log = logging.getLogger("trainprobe")

_PATCHED = "__trainprobe_hook__"
_TRAINING_MODULES = ("xgboost", "xgboost.training", "xgboost.sklearn")


def _job_hyperparameters() -> dict[str, Any]:
    try:
        value = json.loads(settings.HYPERPARAMETERS.get() or "{}")
    except ValueError:
        return {}
    return dict(value) if isinstance(value, Mapping) else {}


def _params_dict(params: object) -> dict[str, Any]:
    """The training's parameters that are set: the scikit-learn API passes every one of its
    parameters to ``train``, None for those left to XGBoost's default."""
    if isinstance(params, Mapping):
        pairs = list(params.items())
    elif isinstance(params, Sequence):
        pairs = [pair for pair in params if isinstance(pair, tuple) and len(pair) == 2]
    else:
        return {}
    return {str(name): value for name, value in pairs if value is not None}


def _is_a_hook(callback: object) -> bool:
    module = type(callback).__module__
    return module.startswith(("trainprobe.capture.xgboost", "smdebug.xgboost"))


def _validation_set(dtrain: object, evals: object) -> Any:
    """The last evaluation set that is not the training data, if any."""
    chosen = None
    entries = evals if isinstance(evals, (list, tuple)) else ()
    for entry in entries:
        data = entry[0] if isinstance(entry, (tuple, list)) and entry else None
        if data is not None and data is not dtrain:
            chosen = data
    return chosen


def _add_hook(arguments: inspect.BoundArguments) -> None:
    """Put the job's hook among the training's callbacks (see the module docstring)."""
    from trainprobe.capture.xgboost import hook as hook_module

    callbacks = list(arguments.arguments.get("callbacks") or ())
    if any(_is_a_hook(callback) for callback in callbacks):
        return
    existing = hook_module.get_hook(create_if_not_exists=False)
    hook = existing or hook_module.get_hook(create_if_not_exists=True)
    if hook is None:
        log.warning("trainprobe: no hook configuration file; the training runs without it")
        return
    dtrain = arguments.arguments.get("dtrain")
    if existing is None:
        hook.hyperparameters = _job_hyperparameters() or _params_dict(
            arguments.arguments.get("params")
        )
    if hook.train_data is None:
        hook.train_data = dtrain
    if hook.validation_data is None:
        hook.validation_data = _validation_set(dtrain, arguments.arguments.get("evals"))
    arguments.arguments["callbacks"] = [*callbacks, hook]


def _hooked(train: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(train)

    @functools.wraps(train)
    def hooked_train(*args: Any, **kwargs: Any) -> Any:
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
            return train(*args, **kwargs)
        return train(*arguments.args, **arguments.kwargs)

    setattr(hooked_train, _PATCHED, True)
    return hooked_train


def patch(xgboost: ModuleType) -> None:
    """Wrap ``train`` where xgboost and its scikit-learn API call it from (once)."""
    original = getattr(xgboost, "train", None)
    if original is None or getattr(original, _PATCHED, False):
        return
    hooked = _hooked(original)
    for name in _TRAINING_MODULES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "train", None) is original:
            module.train = hooked  # type: ignore[attr-defined]


def install() -> None:
    """Patch xgboost now if it is imported, else as soon as the script imports it."""
    patch_when_imported("xgboost", patch, "XGBoost")
