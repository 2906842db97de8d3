"""How deep and how long JSON may be, wherever trainprobe reads it from a request.

A request is JSON, and some of its strings hold JSON again: a rule's ``action_json``, the
profiling sub-configs of ``ProfilingParameters`` (``DetailedProfilingConfig``, ...), the
hyperparameters a training script gets decoded, a ListTrainingJobs ``NextToken``. Every one is
read within the same bounds, so that no request can exhaust Python's stack or a parser's time:
lists and objects nested at most ``MAX_JSON_DEPTH`` levels, and a string that holds JSON at most
``MAX_EMBEDDED_JSON_CHARS`` characters long. What is past a bound is refused with its path in
the request, never with a RecursionError.

A value nested too deep is named by the path down to it, cut after ``_SHOWN_STEPS`` steps
(SageMaker's deepest member is six levels down, so the member the user wrote is always named),
a long key shortened: ``DebugHookConfig.HookParameters.k[0].k[0]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from trainprobe.config.errors import ConfigError

__all__ = [
    "MAX_EMBEDDED_JSON_CHARS",
    "MAX_JSON_DEPTH",
    "embedded_json",
    "nesting_problem",
    "path_text",
    "text_nesting_problem",
]

MAX_JSON_DEPTH = 32
"""The deepest nesting of lists and objects a request, or JSON inside one of its strings, may
have; SageMaker's deepest member is 6 levels down."""

MAX_EMBEDDED_JSON_CHARS = 4096
"""The longest string read as JSON inside a request (an ``action_json``, a profiling
sub-config); SageMaker itself keeps these values to 256 characters."""

_SHOWN_STEPS = 6
_SHOWN_KEY_CHARACTERS = 64

_NESTED_TOO_DEEP = f"lists and objects nested at most {MAX_JSON_DEPTH} levels deep"

# The tokens of JSON text that give its shape: strings (keys among them) and punctuation.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]', re.DOTALL)


def path_text(steps: Sequence[str | int], prefix: str = "") -> str:
    """``steps`` below ``prefix`` written as the request's paths are: ``a.b[0].c``."""
    text = prefix
    for step in steps:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += f".{step}" if text else str(step)
    return text


def _too_deep(steps: Sequence[str | int], prefix: str, shown: str) -> ConfigError:
    named = [_short(step) for step in steps[:_SHOWN_STEPS]]
    return ConfigError(path_text(named, prefix), shown, _NESTED_TOO_DEEP)


def _short(step: str | int) -> str | int:
    """A key of a path, kept short enough to read (a key can be as long as a request)."""
    if isinstance(step, int) or len(step) <= _SHOWN_KEY_CHARACTERS:
        return step
    half = _SHOWN_KEY_CHARACTERS // 2
    return f"{step[:half]}...{step[-half:]}"


def nesting_problem(value: object, prefix: str = "") -> ConfigError | None:
    """A ConfigError naming where ``value`` (found at ``prefix``) nests lists and objects deeper
    than ``MAX_JSON_DEPTH`` levels (``value`` itself is the first), or None.

    Walks without recursion, so no nesting can exhaust Python's stack here.
    """
    pending: list[tuple[object, tuple[str | int, ...]]] = [(value, ())]
    while pending:
        item, steps = pending.pop()
        if not isinstance(item, dict | list):
            continue
        if len(steps) >= MAX_JSON_DEPTH:
            return _too_deep(steps, prefix, "{...}" if isinstance(item, dict) else "[...]")
        children = item.items() if isinstance(item, dict) else enumerate(item)
        pending.extend((child, (*steps, key)) for key, child in children)
    return None


def text_nesting_problem(text: str, prefix: str = "") -> ConfigError | None:
    """Like ``nesting_problem``, read from JSON text that may be too deep to parse at all.

    Only the shape is read (strings and punctuation), and only up to the first place that is
    too deep: the path is found however deep the text goes.
    """
    # The lists and objects open at this point of the text, outermost first, each with the key
    # or the index now being read in it.
    kinds: list[str] = []
    steps: list[str | int] = []
    expecting_key = False
    for token in _TOKEN.finditer(text):
        found = token.group()
        if found == "[" or found == "{":
            if len(kinds) >= MAX_JSON_DEPTH:
                return _too_deep(steps, prefix, "{...}" if found == "{" else "[...]")
            kinds.append(found)
            steps.append(0 if found == "[" else "")
            expecting_key = found == "{"
        elif found == "]" or found == "}":
            if kinds:
                kinds.pop()
                steps.pop()
            expecting_key = False
        elif found == ",":
            expecting_key = bool(kinds) and kinds[-1] == "{"
            if kinds and kinds[-1] == "[":
                steps[-1] = int(steps[-1]) + 1
        elif found == ":":
            expecting_key = False
        elif expecting_key:
            steps[-1] = _key(found)
    return None


def _key(token: str) -> str:
    try:
        return str(json.loads(token))
    except ValueError:
        return token.strip('"')


def embedded_json(text: str, field: str) -> Any:
    """The JSON in ``text``, a string of a request found at ``field``, read within the bounds.

    Raises ConfigError naming ``field`` for text that is too long or nested too deep, and
    ``json.JSONDecodeError`` (a ValueError) for text that is not JSON, as ``json.loads`` does.
    """
    if len(text) > MAX_EMBEDDED_JSON_CHARS:
        raise ConfigError(field, text, f"JSON text of at most {MAX_EMBEDDED_JSON_CHARS} characters")
    try:
        found = json.loads(text)
    except RecursionError:
        too_deep = True
    else:
        too_deep = nesting_problem(found) is not None
    if too_deep:
        raise ConfigError(field, text, f"JSON text with {_NESTED_TOO_DEEP}")
    return found
