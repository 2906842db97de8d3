"""``smdebug.analysis.utils``: ``no_refresh`` and ``refresh``, for a trial or a list of them."""

from trainprobe.rules.rule import no_refresh, refresh

__all__ = ["no_refresh", "refresh"]
