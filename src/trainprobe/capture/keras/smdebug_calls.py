"""smdebug's ``KerasHook`` calls, as scripts written for SageMaker Debugger make them.

``wrap_optimizer`` and ``register_model`` are accepted (the hook finds the optimizer and the
model by itself), ``set_mode`` too (the mode comes from the training); the collections can be
read and added to; ``save_scalar`` and ``save_tensor`` values are saved at the next saved step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from trainprobe.capture.collections import (
    CollectionAccess,
    CollectionKeys,
    CollectionSet,
)
from trainprobe.capture.keras.step_saver import StepSaver
from trainprobe.capture.keras.values import host_copy
from trainprobe.capture.save_plan import SavePlan
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys

__all__ = ["SmdebugCalls"]


class SmdebugCalls(CollectionAccess):
    """smdebug's KerasHook methods, over the hook's collections, plan and saver."""

    collections: CollectionSet
    plan: SavePlan
    saver: StepSaver

    if TYPE_CHECKING:

        def set_model(self, model: Any) -> None:
            """Keras's ``Callback.set_model``."""

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """The optimizer, unchanged: the hook finds the gradients it applies by itself (smdebug
        needed this call to see them)."""
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise ConfigError("optimizer", optimizer, "a keras.optimizers.Optimizer")
        return optimizer

    def register_model(self, model: Any) -> None:
        """Follow ``model`` (``fit``'s callbacks do it by themselves)."""
        if not isinstance(model, keras.Model):
            raise ConfigError("model", model, "a keras.Model")
        self.set_model(model)

    def set_mode(self, mode: ModeKeys) -> None:
        """Accepted for smdebug's scripts: the mode comes from the training itself."""
        if not isinstance(mode, ModeKeys):
            raise ConfigError("mode", mode, "a trainprobe.keras.modes value")

    def save_scalar(self, name: str, value: object, sm_metric: bool = False) -> None:
        """Save ``value`` as ``scalar/<name>`` at the next saved step (``sm_metric``: also in the
        ``sm_metrics`` collection)."""
        tensor_name = f"scalar/{name}"
        self.saver.pending_scalars[tensor_name] = np.asarray(value, dtype=np.float64).reshape(())
        if sm_metric:
            self.collections.get(CollectionKeys.SM_METRICS).add_tensor_name(tensor_name)

    def save_tensor(
        self,
        tensor_name: str,
        tensor_value: object,
        collections_to_write: str | Iterable[str] = CollectionKeys.DEFAULT,
    ) -> None:
        """Save ``tensor_value`` as ``tensor_name`` in these collections, at the next step at
        which one of them is saved."""
        names = (
            [collections_to_write]
            if isinstance(collections_to_write, str)
            else list(collections_to_write)
        )
        for collection in names:
            self.collections.get(collection).add_tensor_name(tensor_name)
            self.plan.include(collection)
        self.saver.pending_tensors[tensor_name] = host_copy(tensor_value)
