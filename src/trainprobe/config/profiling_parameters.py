"""The text format of the profiling sub-configs inside ``ProfilingParameters``.

``ProfilingParameters`` is a string-to-string map, and its sub-configs (``DetailedProfilingConfig``,
``PythonProfilingConfig``, ...) are dictionaries written as text. Three spellings of that text
exist and all are read here, without ever evaluating it:

- real JSON: ``{"StartStep": 5, "NumSteps": 1}``;
- what the SageMaker SDK writes, which is not JSON: ``{"StartStep": 5, "NumSteps": 1, }`` (a
  trailing comma, Python literals such as ``True``, strings written without escaping);
- what the API documentation shows: quotes escaped as ``\\"``, ``//`` comments, quoted numbers.

Single-quoted strings are read too. A text that cannot be read is reported with the field, the
position and what was expected there; so is one longer or nested deeper than the bounds of
``trainprobe.config.json_bounds`` (the reader recurses once a level, so its depth is bounded
before Python's stack is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from trainprobe.config.errors import ConfigError
from trainprobe.config.json_bounds import MAX_EMBEDDED_JSON_CHARS, MAX_JSON_DEPTH

__all__ = ["format_config_text", "parse_config_text"]

ConfigValue = str | int | float | bool | None | list["ConfigValue"] | dict[str, "ConfigValue"]

_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_LITERALS: dict[str, ConfigValue] = {"true": True, "false": False, "null": None, "none": None}
_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n"}
_ESCAPES |= {"r": "\r", "t": "\t"}
_EXAMPLE = '{"StartStep": 5, "NumSteps": 1}'


class _Unreadable(Exception):
    def __init__(self, position: int, reason: str) -> None:
        super().__init__(reason)
        self.position = position
        self.reason = reason


class _Reader:
    """A recursive-descent reader over one text; ``position`` only moves forward."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0
        self.depth = 1  # the dictionary the text holds

    def fail(self, reason: str) -> _Unreadable:
        return _Unreadable(self.position, reason)

    def skip_blanks(self) -> None:
        text = self.text
        while self.position < len(text):
            if text[self.position].isspace():
                self.position += 1
            elif text.startswith("//", self.position) or text[self.position] == "#":
                end = text.find("\n", self.position)
                self.position = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.position):
                end = text.find("*/", self.position + 2)
                if end < 0:
                    raise self.fail("a comment opened with /* is never closed")
                self.position = end + 2
            else:
                return

    def peek(self) -> str:
        self.skip_blanks()
        return self.text[self.position : self.position + 1]

    def expect(self, token: str, what: str) -> None:
        if self.peek() != token:
            char = self.text[self.position : self.position + 1]
            raise self.fail(f"expected {what}, found {repr(char) if char else 'the end'}")
        self.position += 1

    def value(self) -> ConfigValue:
        first = self.peek()
        if first in ("{", "["):
            if self.depth >= MAX_JSON_DEPTH:
                raise self.fail(f"lists and dictionaries nest at most {MAX_JSON_DEPTH} levels deep")
            self.depth += 1
            nested = self.mapping() if first == "{" else self.sequence()
            self.depth -= 1
            return nested
        if first in ('"', "'") or self.text.startswith('\\"', self.position):
            return self.string()
        number = _NUMBER.match(self.text, self.position)
        if number:
            self.position = number.end()
            found = number.group()
            return float(found) if any(c in found for c in ".eE") else int(found)
        word = _WORD.match(self.text, self.position)
        if word and word.group().lower() in _LITERALS:
            self.position = word.end()
            return _LITERALS[word.group().lower()]
        if not first:
            raise self.fail("the text ends where a value was expected")
        raise self.fail(
            f"expected a value (a string, a number, true, false or null), found {first!r}"
        )

    def key(self) -> str:
        if self.peek() in ('"', "'") or self.text.startswith('\\"', self.position):
            return self.string()
        word = _WORD.match(self.text, self.position)
        if not word:
            raise self.fail("expected a key (a quoted name)")
        self.position = word.end()
        return word.group()

    def string(self) -> str:
        text = self.text
        if text.startswith('\\"', self.position):
            end = text.find('\\"', self.position + 2)
            if end < 0:
                raise self.fail('a string opened with \\" is never closed')
            found = text[self.position + 2 : end]
            self.position = end + 2
            return found
        quote = text[self.position]
        start = self.position
        self.position += 1
        parts: list[str] = []
        while self.position < len(text):
            char = text[self.position]
            if char == quote:
                self.position += 1
                return "".join(parts)
            if char == "\\" and self.position + 1 < len(text):
                parts.append(self.escape())
                continue
            if char == "\n":
                break
            parts.append(char)
            self.position += 1
        self.position = start
        raise self.fail("a string is never closed on its line")

    def escape(self) -> str:
        following = self.text[self.position + 1]
        if following == "u":
            digits = self.text[self.position + 2 : self.position + 6]
            if re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                self.position += 6
                return chr(int(digits, 16))
        self.position += 2
        # An unknown escape keeps its backslash, as Python does: the SDK writes regexes such as
        # "\d+" without escaping them.
        return _ESCAPES.get(following, "\\" + following)

    def mapping(self) -> dict[str, ConfigValue]:
        self.expect("{", "'{'")
        found: dict[str, ConfigValue] = {}
        while self.peek() != "}":
            key_at = self.position
            key = self.key()
            if key in found:
                raise _Unreadable(key_at, f"the key {key!r} appears twice")
            self.expect(":", f"':' after the key {key!r}")
            found[key] = self.value()
            if self.peek() == ",":
                self.position += 1
            elif self.peek() != "}":
                self.expect("}", "',' or '}'")
        self.position += 1
        return found

    def sequence(self) -> list[ConfigValue]:
        self.expect("[", "'['")
        found: list[ConfigValue] = []
        while self.peek() != "]":
            found.append(self.value())
            if self.peek() == ",":
                self.position += 1
            elif self.peek() != "]":
                self.expect("]", "',' or ']'")
        self.position += 1
        return found


def _where(text: str, position: int) -> str:
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return f"at position {position} (line {line}, column {column})"


def parse_config_text(text: str, field: str = "") -> dict[str, ConfigValue]:
    """The dictionary written in ``text``, in any of the three spellings the module describes.

    Raises ConfigError naming ``field`` and the position where the text stops making sense.
    """
    if not isinstance(text, str):
        raise ConfigError(field, text, f"a dictionary written as text, such as {_EXAMPLE!r}")
    if len(text) > MAX_EMBEDDED_JSON_CHARS:
        raise ConfigError(
            field, text, f"a dictionary written in at most {MAX_EMBEDDED_JSON_CHARS} characters"
        )
    reader = _Reader(text)
    try:
        if reader.peek() != "{":
            raise reader.fail("expected '{' to open the dictionary")
        found = reader.mapping()
        if reader.peek() == ",":
            reader.position += 1
        if reader.peek():
            raise reader.fail(f"unexpected {reader.peek()!r} after the closing '}}'")
    except _Unreadable as error:
        raise ConfigError(
            field,
            text,
            f"a dictionary such as {_EXAMPLE!r}; {_where(text, error.position)}: {error.reason}",
        ) from None
    return found


def _format_value(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def format_config_text(config: Mapping[str, object]) -> str:
    """``config`` written as the SageMaker SDK writes a sub-config: ``{"StartStep": 5, }``.

    The output is what the SDK sends, byte for byte, so that requests built by trainprobe and by
    the SDK are the same.
    """
    items = "".join(
        f"{_format_value(key)}: {_format_value(value)}, " for key, value in config.items()
    )
    return "{" + items + "}"
