"""``smdebug.core.save_config``: ``SaveConfig`` and ``SaveConfigMode``."""

from trainprobe.capture.save_config import SaveConfig, SaveConfigMode

__all__ = ["SaveConfig", "SaveConfigMode"]
