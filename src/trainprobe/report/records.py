"""What crosses from reading a job to writing its report: each section a small typed record.

A record is a frozen dataclass whose fields are its section's keys in snake case
(``initialization_seconds``); ``to_json`` gives them as ``profiler-report.json`` names them
(``InitializationSeconds``: the field's name in Pascal case, or the key its metadata names,
``field(metadata=json_key("GPUs"))``; with ``field(metadata=SPREAD)``, a dictionary's keys among
the record's own, as a statistics row's percentiles), records within records included. The page
renders the records; the JSON file and the page's script read ``to_json``'s form.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["SPREAD", "Envelope", "Record", "Summary", "json_key"]

Envelope = dict[str, list[float | None]]
"""A series made small enough to plot (``series.envelope``): ``x``, ``mean``, ``min``, ``max``."""
Summary = dict[str, float]
"""A series' count, mean, extremes and percentiles (``series.summary``)."""


SPREAD: Mapping[str, Any] = MappingProxyType({"spread": True})
"""A field's metadata: its keys go among the record's own keys in the JSON."""


def json_key(name: str) -> Mapping[str, Any]:
    """A field's metadata: its key in the JSON is ``name`` (where Pascal case would not give
    it)."""
    return MappingProxyType({"json": name})


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


@dataclasses.dataclass(frozen=True)
class Record:
    """A section of the report, or a row of one (see the module docstring)."""

    def to_json(self) -> dict[str, Any]:
        """The record as the report's JSON holds it."""
        found: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = _as_json(getattr(self, field.name))
            if field.metadata.get("spread"):
                found.update(value)
            else:
                found[field.metadata.get("json") or _pascal(field.name)] = value
        return found


def _as_json(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [_as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    return value
