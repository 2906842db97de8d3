"""The root of every error trainprobe raises on purpose.

Catch ``TrainprobeError`` to handle anything trainprobe refused or could not do; each layer's
errors (configuration, formats, analysis, rules, jobs) subclass it.
"""

from __future__ import annotations

__all__ = ["TrainprobeError"]


class TrainprobeError(Exception):
    """Something trainprobe refused or could not do; the message says what and why."""
