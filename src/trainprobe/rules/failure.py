"""Saying where a rule failed: the exception, and the file and line it came from.

For a custom rule, the line that matters is in the user's file, not in trainprobe: the
innermost frame from that file is named when there is one.
"""

from __future__ import annotations

import os
import traceback

__all__ = ["describe_failure", "failure_location"]


def failure_location(error: BaseException, prefer_file: str | None = None) -> str | None:
    """``file, line N, in function`` for ``error``: the innermost frame in ``prefer_file`` when
    it has one there, else the innermost frame; None without a traceback."""
    if isinstance(error, SyntaxError) and error.filename:
        return f"{error.filename}, line {error.lineno}"
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return None
    chosen = frames[-1]
    if prefer_file is not None:
        wanted = os.path.realpath(prefer_file)
        inside = [frame for frame in frames if os.path.realpath(frame.filename) == wanted]
        if inside:
            chosen = inside[-1]
    return f"{chosen.filename}, line {chosen.lineno}, in {chosen.name}"


def describe_failure(error: BaseException, prefer_file: str | None = None) -> str:
    """``TypeError: message (at file, line N, in function)``: what failed and where."""
    message = error.msg if isinstance(error, SyntaxError) else str(error)
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    where = failure_location(error, prefer_file)
    return f"{text} (at {where})" if where else text
