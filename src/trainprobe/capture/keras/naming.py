"""The names the Keras hook saves tensors under: smdebug's TensorFlow names, decided once here.

=========================  ==============================================  ====================
what                       name                                            collection
=========================  ==============================================  ====================
a layer's variable         ``<layer>/weights/<layer>/<variable>:0``        weights, or biases
                           (``dense/weights/dense/kernel:0``)              for a ``bias``
its applied gradient       ``gradients/<layer>/<variable>Grad``            gradients
                           (``gradients/dense/kernelGrad``)
an optimizer variable      ``<optimizer>/<variable>:0``                    optimizer_variables
                           (``adam/iteration:0``, ``adam/learning_rate:0``)
the batch's own loss       ``batch_loss``                                  losses
a key of Keras's logs      the key (``loss``, ``accuracy``, ``val_loss``)  losses if it ends in
                                                                           ``loss``, else metrics
=========================  ==============================================  ====================

``<layer>`` is the model's own layer (``model.layers``) that holds the variable, and the part
after ``weights/`` the variable's Keras path below the model (``sequential/dense/kernel`` becomes
``dense/kernel``), so a layer nested in another keeps its full path
(``block/weights/block/dense/kernel:0``). Keras's logged ``loss`` is the running mean of the
epoch's batches so far (smdebug saved the same under the same name); ``batch_loss`` is the loss of
the batch that just ran, as the training computed it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from trainprobe.capture.collections import CollectionKeys

__all__ = [
    "BATCH_LOSS",
    "GRADIENT_PREFIX",
    "gradient_name",
    "logs_collection",
    "model_variables",
    "optimizer_variable_name",
    "variable_name",
]

BATCH_LOSS = "batch_loss"
GRADIENT_PREFIX = "gradients/"


def _below_model(model: Any, path: str) -> str:
    prefix = f"{model.name}/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def model_variables(model: Any) -> Iterator[tuple[str, str, Any]]:
    """``(name, collection, variable)`` for each variable of ``model``'s layers, once each."""
    seen: set[int] = set()
    for layer in model.layers:
        for variable in layer.weights:
            if id(variable) in seen:
                continue
            seen.add(id(variable))
            below = _below_model(model, str(variable.path))
            if not below.startswith(f"{layer.name}/"):
                below = f"{layer.name}/{variable.name}"
            collection = (
                CollectionKeys.BIASES if variable.name == "bias" else CollectionKeys.WEIGHTS
            )
            yield f"{layer.name}/weights/{below}:0", collection, variable


def variable_name(weight_name: str) -> str:
    """The variable's path below the model (``dense/kernel``) from its saved name."""
    return weight_name.split("/weights/", 1)[-1].removesuffix(":0")


def gradient_name(weight_name: str) -> str:
    """The name of the gradient of the variable saved as ``weight_name``."""
    return f"{GRADIENT_PREFIX}{variable_name(weight_name)}Grad"


def optimizer_variable_name(variable: Any) -> str:
    """The name of an optimizer variable (its Keras path, as TensorFlow named variables)."""
    return f"{variable.path}:0"


def logs_collection(key: str) -> str:
    """The collection of a key of Keras's logs: ``losses`` for a loss, else ``metrics``."""
    return CollectionKeys.LOSSES if key.endswith("loss") else CollectionKeys.METRICS
