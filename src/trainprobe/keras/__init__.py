"""``trainprobe.keras``: the Keras 3 hook, with smdebug's ``smdebug.tensorflow`` names.

``import trainprobe.keras as smd`` then ``hook = smd.Hook(out_dir, ...)`` (also ``smd.KerasHook``)
and ``model.fit(..., callbacks=[hook])``; ``smd.get_hook()``, ``smd.modes.TRAIN``,
``smd.SaveConfig``, ``smd.SaveConfigMode``, ``smd.ReductionConfig``, ``smd.CollectionKeys``, as
with smdebug. It works on Keras's TensorFlow, JAX and PyTorch backends; importing it imports
keras (and so the backend ``KERAS_BACKEND`` names).
"""

from trainprobe.capture.collections import Collection, CollectionKeys
from trainprobe.capture.keras import Hook, get_hook
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.storage.modes import ModeKeys

KerasHook = Hook
modes = ModeKeys

__all__ = [
    "Collection",
    "CollectionKeys",
    "Hook",
    "KerasHook",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "get_hook",
    "modes",
]
