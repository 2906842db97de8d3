"""``smdebug.tensorflow``: the Keras hook (``smd.KerasHook``) and the names scripts use with it.

smdebug's ``KerasHook`` is trainprobe's Keras 3 hook (``trainprobe.keras.Hook``), on Keras's
TensorFlow, JAX and PyTorch backends. ``SessionHook`` and ``EstimatorHook`` served TF1 sessions and
``tf.estimator``, which TensorFlow removed in 2.16: making one raises an error saying so.
"""

from __future__ import annotations

from typing import Any, NoReturn

from trainprobe.capture.collections import Collection, CollectionKeys
from trainprobe.capture.keras import Hook as KerasHook
from trainprobe.capture.keras import get_hook as _get_hook
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.config.errors import ConfigError
from trainprobe.smdebug_names.smdebug.trials.utils import create_trial
from trainprobe.storage.modes import ModeKeys

modes = ModeKeys

__all__ = [
    "Collection",
    "CollectionKeys",
    "EstimatorHook",
    "KerasHook",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "SessionHook",
    "create_trial",
    "get_hook",
    "modes",
]

_GONE = {
    "session": "TF1 sessions (tf.compat.v1.Session and its SessionRunHook)",
    "estimator": "tf.estimator",
}


def _gone(kind: str) -> NoReturn:
    raise ConfigError(
        "hook_type",
        kind,
        f"'keras': {_GONE[kind]} were removed from TensorFlow in 2.16; "
        "use KerasHook as a callback of model.fit",
    )


class SessionHook:
    """smdebug's hook for TF1 sessions, which TensorFlow no longer has: raises ConfigError."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _gone("session")

    @classmethod
    def create_from_json_file(cls, *args: Any, **kwargs: Any) -> SessionHook:
        """Raises ConfigError: TF1 sessions are gone."""
        _gone("session")


class EstimatorHook:
    """smdebug's hook for ``tf.estimator``, which TensorFlow no longer has: raises ConfigError."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _gone("estimator")

    @classmethod
    def create_from_json_file(cls, *args: Any, **kwargs: Any) -> EstimatorHook:
        """Raises ConfigError: tf.estimator is gone."""
        _gone("estimator")


def get_hook(
    hook_type: str | None = None,
    json_config_path: str | None = None,
    create_if_not_exists: bool = False,
) -> KerasHook | None:
    """The Keras hook of this process, or one made from the hook configuration file with
    ``create_if_not_exists`` (smdebug's signature; ``hook_type`` ``"keras"`` or None)."""
    if hook_type is not None and hook_type != "keras":
        if hook_type in _GONE:
            _gone(hook_type)
        raise ConfigError("hook_type", hook_type, "'keras' (or None)")
    return _get_hook(json_config_path, create_if_not_exists=create_if_not_exists)
