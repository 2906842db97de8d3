"""Whether a regular expression from a request or an SDK argument compiles, and why not.

Rules, collections, the hook and the data loader profiler take regular expressions as text
(``tensor_regex``, ``include_regex``, ``MetricsRegex``, a metric's ``Regex``): each is compiled
when the configuration is checked, never first inside a running job. Groups nested too deep
for ``re``'s compiler (a RecursionError) or a repeat too large (OverflowError) are refused like a
syntax error, and the reason says so the same way however deep the caller's stack is.
"""

from __future__ import annotations

import re

__all__ = ["compile_problem"]


def compile_problem(pattern: str) -> str | None:
    """Why ``pattern`` does not compile (``re``'s words), or None when it does."""
    try:
        re.compile(pattern)
    except re.error as error:
        return str(error)
    except RecursionError:
        return "its groups nest too deep to compile"
    except OverflowError:
        return "a repeat count too large to compile"
    return None
