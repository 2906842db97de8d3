"""Reading request JSON the way the AWS CLI does, with errors that point at the broken spot.

Requests arrive as files (``job.json`` or the AWS CLI's ``file://job.json``), as bytes (an HTTP
body) or as text. Whatever arrives, the answer is the request or a ConfigError saying what is
wrong with it, never another exception: bytes that are not UTF-8 (the byte's offset is named; a
leading UTF-8 byte order mark is allowed), an empty request, malformed JSON (its line and column),
NaN and Infinity (not JSON), nesting deeper than a request ever does (named by its path in the
request, however deep it goes: ``trainprobe.config.json_bounds``), and a document that is not a
JSON object are all refused, and so is a request over ``MAX_REQUEST_BYTES``. A file that cannot
be read is a RequestFileError, so a command can tell "no request" from "a bad request".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.config.json_bounds import MAX_JSON_DEPTH, nesting_problem, text_nesting_problem

__all__ = ["MAX_REQUEST_BYTES", "RequestFileError", "load_request", "parse_request"]

MAX_REQUEST_BYTES = 1024 * 1024
"""The largest request read, from a file or (``trainprobe.jobs.server.api_app``) an HTTP body."""

_BOM = "\ufeff"


class RequestFileError(ConfigError):
    """The request file could not be read at all."""


def _text(data: str | bytes, source: str) -> str:
    if isinstance(data, str):
        return data.removeprefix(_BOM)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{source} (byte {error.start})",
            data[error.start : error.start + 4],
            "a request in UTF-8 text: this byte is not UTF-8",
        ) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def parse_request(data: str | bytes, *, source: str = "request") -> dict[str, Any]:
    """The JSON object in ``data`` (text, or UTF-8 bytes); ``source`` names it in errors."""
    text = _text(data, source)
    if not text.strip():
        raise ConfigError(
            source, text, "the request must be valid JSON, an object ({} at least): it is empty"
        )
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as error:
        line_text = text.splitlines()[error.lineno - 1]
        raise ConfigError(
            f"{source} (line {error.lineno}, column {error.colno})",
            line_text.strip()[:200],
            f"the request must be valid JSON: {error.msg}",
        ) from None
    except RecursionError:
        raise _too_deep(text_nesting_problem(text), source) from None
    except ValueError as error:  # what _refuse_constant raised
        raise ConfigError(
            source, str(error), "JSON numbers only: NaN and Infinity are not JSON"
        ) from None
    if not isinstance(document, dict):
        raise ConfigError(
            source, type(document).__name__, "the request must be a JSON object ({...})"
        )
    too_deep = nesting_problem(document)
    if too_deep is not None:
        raise _too_deep(too_deep, source)
    return document


def _too_deep(problem: ConfigError | None, source: str) -> ConfigError:
    """``problem`` (nesting too deep, at its path in the request), or the same said of the
    whole ``source`` when no member of a request holds it (the document is a list)."""
    if problem is None or not problem.field or problem.field.startswith("["):
        allowed = f"a JSON object, lists and objects nested at most {MAX_JSON_DEPTH} levels deep"
        return ConfigError(source, "[...]", allowed)
    return problem


def load_request(location: str) -> dict[str, Any]:
    """The JSON object in the file at ``location`` (a path, or ``file://`` and a path); a file
    over ``MAX_REQUEST_BYTES`` is refused unread, as the HTTP API refuses such a body."""
    path = Path(location.removeprefix("file://"))
    try:
        with path.open("rb") as file:
            data = file.read(MAX_REQUEST_BYTES + 1)
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise RequestFileError(
            f"request file {location}", location, f"a readable JSON file ({reason})"
        ) from None
    if len(data) > MAX_REQUEST_BYTES:
        raise ConfigError(
            str(path),
            f"over {MAX_REQUEST_BYTES} bytes",
            f"a request of at most {MAX_REQUEST_BYTES} bytes; SageMaker's requests are far smaller",
        )
    return parse_request(data, source=str(path))
