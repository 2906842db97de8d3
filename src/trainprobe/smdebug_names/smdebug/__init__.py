"""``smdebug``: its top-level names (``from smdebug import modes, SaveConfig``), from trainprobe."""

from trainprobe.capture.collections import CollectionKeys
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.storage.modes import ModeKeys

modes = ModeKeys

__version__ = "1.0.34"
"""The smdebug release whose names and behaviour these follow."""

__all__ = [
    "CollectionKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "__version__",
    "modes",
]
