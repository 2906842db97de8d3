"""``trainprobe.xgboost``: smdebug's ``smdebug.xgboost`` names, for XGBoost training scripts.

``import trainprobe.xgboost as smd`` then ``hook = smd.Hook(out_dir, ...)`` and
``xgb.train(params, dtrain, callbacks=[hook])``; ``smd.get_hook()``, ``smd.SaveConfig``,
``smd.CollectionKeys``, as with smdebug.
"""

from trainprobe.capture.collections import Collection, CollectionKeys
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.capture.xgboost import Hook, get_hook
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
    "get_hook",
    "modes",
]
