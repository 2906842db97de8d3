"""``smdebug.pytorch``: the PyTorch hook and the names scripts use with it (``smd.Hook``)."""

from trainprobe.capture.collections import Collection, CollectionKeys
from trainprobe.capture.pytorch import Hook
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.smdebug_names.smdebug.pytorch.singleton_utils import del_hook, get_hook, set_hook
from trainprobe.smdebug_names.smdebug.trials.utils import create_trial
from trainprobe.storage.modes import ModeKeys

modes = ModeKeys

__all__ = [
    "Collection",
    "CollectionKeys",
    "Hook",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "create_trial",
    "del_hook",
    "get_hook",
    "modes",
    "set_hook",
]
