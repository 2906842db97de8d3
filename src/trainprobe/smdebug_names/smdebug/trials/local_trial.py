"""``smdebug.trials.local_trial``: ``LocalTrial(name, dirname, ...)``, a trial of a directory."""

from __future__ import annotations

from trainprobe.analysis.trial import DEFAULT_TIMEOUT, Trial

__all__ = ["LocalTrial"]


class LocalTrial(Trial):
    """smdebug's constructor for a trial of a local directory.

    ``parallel``, ``check``, ``index_mode`` and ``cache`` tuned smdebug's reader; trainprobe's
    reader has no such switches, so they are accepted and change nothing.
    """

    def __init__(
        self,
        name: str,
        dirname: str,
        range_steps: tuple[int | None, int | None] | None = None,
        parallel: bool = True,
        check: bool = False,
        index_mode: bool = True,
        cache: bool = False,
    ) -> None:
        super().__init__(dirname.strip(), name, timeout=DEFAULT_TIMEOUT, range_steps=range_steps)
