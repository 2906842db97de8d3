"""HTML pieces of the report: escaped text, numbers for people, and tables.

Everything that reaches the page from a job's files goes through ``text``, so a rule's
recommendation or a function's name can never inject markup.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bytes_text", "details_table", "number", "seconds_text", "table", "text"]

_LIST_SHOWN = 8
_MAX_DEPTH = 4


def text(value: object) -> str:
    """``value`` as escaped HTML text."""
    return html.escape("" if value is None else str(value))


def number(value: object, digits: int = 4) -> str:
    """A number to ``digits`` significant digits, with thousands separators; '' for None and
    for a value that is not finite (which the report's JSON holds as null)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if isinstance(value, int) or value.is_integer():
        return f"{int(value):,}"
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    shown = f"{value:,.{decimals}f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def seconds_text(seconds: float | None) -> str:
    """A duration for people: ``42.1 s``, ``3 min 5 s``, ``2 h 14 min``; '' for None and for a
    value that is not finite."""
    if seconds is None or not math.isfinite(seconds):
        return ""
    if seconds < 60:
        return f"{number(seconds, 3)} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def bytes_text(count: float | None) -> str:
    """A size for people: ``512 B``, ``3.2 MB`` (powers of 1000); '' for None and for a value
    that is not finite."""
    if count is None or not math.isfinite(count):
        return ""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(count) < 1000 or unit == "GB":
            return f"{number(count, 3)} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, css_class: str = "") -> str:
    """A table of already formatted cells (HTML) under escaped headers."""
    head = "".join(f"<th>{text(header)}</th>" for header in headers)
    head = f"<thead><tr>{head}</tr></thead>" if head else ""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    attribute = f' class="{text(css_class)}"' if css_class else ""
    return f"<table{attribute}>{head}<tbody>{body}</tbody></table>"


def details_table(value: Any, depth: int = 0) -> str:
    """Any JSON value (a rule's evidence) as nested tables: mappings as key/value rows, lists
    of mappings as rows under their keys, long lists of numbers cut short."""
    if depth > _MAX_DEPTH:
        return text("…")
    if isinstance(value, Mapping):
        if not value:
            return '<span class="muted">none</span>'
        rows = [
            (f"<b>{text(key)}</b>", details_table(item, depth + 1)) for key, item in value.items()
        ]
        return table((), rows, css_class="details")
    if isinstance(value, list):
        if value and all(isinstance(item, Mapping) for item in value):
            keys = list(dict.fromkeys(key for item in value for key in item))
            cells = [[details_table(item.get(key), depth + 1) for key in keys] for item in value]
            return table(keys, cells[:50], css_class="details")
        shown = ", ".join(details_table(item, depth + 1) for item in value[:_LIST_SHOWN])
        more = f", … ({len(value)} values)" if len(value) > _LIST_SHOWN else ""
        return f"[{shown}{more}]"
    return number(value) if isinstance(value, int | float) else text(value)
