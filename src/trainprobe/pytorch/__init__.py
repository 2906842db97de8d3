"""``trainprobe.pytorch``: smdebug's ``smdebug.pytorch`` names, for PyTorch training scripts.

``import trainprobe.pytorch as smd`` then ``smd.Hook(...)``, ``smd.get_hook()``,
``smd.modes.TRAIN``, ``smd.SaveConfig``, ``smd.SaveConfigMode``, ``smd.ReductionConfig``,
``smd.CollectionKeys``, as with smdebug.
"""

from trainprobe.capture.collections import Collection, CollectionKeys
from trainprobe.capture.pytorch import Hook, del_hook, get_hook, set_hook
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.storage.modes import ModeKeys

modes = ModeKeys

__all__ = [
    "Collection",
    "CollectionKeys",
    "Hook",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "del_hook",
    "get_hook",
    "modes",
    "set_hook",
]
