"""``smdebug.core.modes``: ``ModeKeys`` and the mode names."""

from __future__ import annotations

from trainprobe.storage.modes import ModeKeys

ALLOWED_MODES = [ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL]
ALLOWED_MODE_NAMES = [mode.name for mode in ALLOWED_MODES]
MODE_STEP_PLUGIN_NAME = "mode_step"
MODE_PLUGIN_NAME = "mode"

__all__ = [
    "ALLOWED_MODES",
    "ALLOWED_MODE_NAMES",
    "MODE_PLUGIN_NAME",
    "MODE_STEP_PLUGIN_NAME",
    "ModeKeys",
    "str_to_mode_keys",
]


def str_to_mode_keys(mode_str: str) -> ModeKeys:
    """The mode named ``mode_str`` in lower case ("train", "eval", "predict", "global")."""
    if mode_str not in ("train", "eval", "predict", "global"):
        raise ValueError(f"mode {mode_str!r}: expected one of train, eval, predict, global")
    return ModeKeys[mode_str.upper()]
