"""``LocalTrial(name, dirname)``: smdebug's constructor for the trial of a local directory.

smdebug's users build a trial two ways: ``create_trial(path)``, or ``LocalTrial(name, dirname)``
(its own tests and older notebooks do). Both give the same trial here; ``trainprobe.trials`` and
``smdebug.trials`` export this one class.
"""

from __future__ import annotations

import os

from trainprobe.analysis.trial import DEFAULT_TIMEOUT, Trial

__all__ = ["LocalTrial"]


class LocalTrial(Trial):
    """The trial of the tensor output in the local directory ``dirname``, named ``name``.

    ``parallel``, ``check``, ``index_mode`` and ``cache`` tuned smdebug's reader; trainprobe's
    reader has no such switches, so they are accepted and change nothing.
    """

    def __init__(
        self,
        name: str,
        dirname: str | os.PathLike[str],
        range_steps: tuple[int | None, int | None] | None = None,
        parallel: bool = True,
        check: bool = False,
        index_mode: bool = True,
        cache: bool = False,
    ) -> None:
        path = os.path.expanduser(os.fspath(dirname).strip())
        super().__init__(path, name, timeout=DEFAULT_TIMEOUT, range_steps=range_steps)
