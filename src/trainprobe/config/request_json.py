"""Reading request JSON the way the AWS CLI does, with errors that point at the broken spot.

Requests arrive as files (``job.json`` or the AWS CLI's ``file://job.json``) or as text. Malformed
JSON is reported with its line and column, and a request that is not a JSON object is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainprobe.config.errors import ConfigError

__all__ = ["load_request", "parse_request"]


def parse_request(text: str, *, source: str = "request") -> dict[str, Any]:
    """The JSON object in ``text``; ``source`` names it in errors (a file name, say)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        line_text = text.splitlines()[error.lineno - 1] if text.strip() else ""
        raise ConfigError(
            f"{source} (line {error.lineno}, column {error.colno})",
            line_text.strip(),
            f"the request must be valid JSON: {error.msg}",
        ) from None
    if not isinstance(document, dict):
        raise ConfigError(source, type(document).__name__, "the request must be a JSON object")
    return document


def load_request(location: str) -> dict[str, Any]:
    """The JSON object in the file at ``location`` (a path, or ``file://`` and a path)."""
    path = Path(location.removeprefix("file://"))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(
            f"request file {location}", location, f"a readable JSON file ({error.strerror})"
        ) from None
    return parse_request(text, source=str(path))
