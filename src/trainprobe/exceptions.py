"""The errors a trial raises, importable as smdebug users import ``smdebug.exceptions``.

See ``trainprobe.analysis.exceptions`` for the hierarchy and the list of names, kept there
alone; configuration errors are ``trainprobe.config.errors.ConfigError``.
"""

from __future__ import annotations

from trainprobe.analysis import exceptions as _analysis_exceptions
from trainprobe.analysis.exceptions import *  # noqa: F403

__all__ = list(_analysis_exceptions.__all__)
