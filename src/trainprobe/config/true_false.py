"""SageMaker's yes/no values: a bool, or the strings ``true`` and ``false`` in any case.

The SDK passes hook, reduction and rule parameters as strings, so ``"True"`` and ``True`` mean
the same. (Environment variables take more words: ``trainprobe.settings.parse_flag``.)
"""

from __future__ import annotations

__all__ = ["true_or_false"]


def true_or_false(value: object) -> bool | None:
    """``value`` as a bool when it is one or spells one (``"true"``/``"false"``); else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None
