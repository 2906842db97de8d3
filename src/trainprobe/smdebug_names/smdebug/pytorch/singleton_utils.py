"""``smdebug.pytorch.singleton_utils``: the hook of the process, with smdebug's signatures."""

from __future__ import annotations

from trainprobe.capture.pytorch import Hook, del_hook, set_hook
from trainprobe.capture.pytorch import get_hook as _get_hook

__all__ = ["del_hook", "get_hook", "set_hook"]


def get_hook(
    json_config_path: str | None = None, create_if_not_exists: bool = False
) -> Hook | None:
    """The hook of this process (smdebug's argument order: the configuration file first)."""
    return _get_hook(create_if_not_exists=create_if_not_exists, json_config_path=json_config_path)
