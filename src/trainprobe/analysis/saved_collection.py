"""A collection as the training job saved it in its collections file, read back for analysis.

The attributes have smdebug's names (``name``, ``include_regex``, ``tensor_names``,
``reduction_config``, ``save_config``, ``save_histogram``) so that code written against
smdebug's ``trial.collection(name)`` keeps working. The configs stay as their JSON dicts.

As in smdebug, a trial's collection can be extended for the analysis (``include``,
``add_tensor_name``): ``trial.tensor_names(collection=...)`` then lists what it now matches.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SavedCollection"]


@dataclass
class SavedCollection:
    """One collection of a trial: its name, membership rules and saving configuration."""

    name: str
    include_regex: tuple[str, ...] = ()
    tensor_names: frozenset[str] = frozenset()
    reduction_config: dict[str, Any] | None = None
    save_config: dict[str, Any] | None = None
    save_histogram: bool = True
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, name: str, entry: Mapping[str, Any]) -> SavedCollection:
        """The collection described by one entry of a collections file."""
        regex = entry.get("include_regex") or ()
        if isinstance(regex, str):
            regex = (regex,)
        known = {"name", "include_regex", "tensor_names", "reduction_config", "save_config"}
        known.add("save_histogram")
        return cls(
            name=str(entry.get("name") or name),
            include_regex=tuple(str(r) for r in regex),
            tensor_names=frozenset(str(t) for t in entry.get("tensor_names") or ()),
            reduction_config=entry.get("reduction_config"),
            save_config=entry.get("save_config"),
            save_histogram=bool(entry.get("save_histogram", True)),
            extra={key: value for key, value in entry.items() if key not in known},
        )

    def include(self, regex: str | list[str] | tuple[str, ...]) -> None:
        """Also count the tensors whose names ``regex`` (one or several) finds."""
        added = [regex] if isinstance(regex, str) else list(regex)
        self.include_regex = (*self.include_regex, *added)

    def add_tensor_name(self, tname: str) -> None:
        """Also count the tensor ``tname``."""
        self.tensor_names = self.tensor_names | {tname}

    def matches(self, tensor_name: str) -> bool:
        """Whether ``tensor_name`` belongs here: listed by name, or found by any regex.

        Regexes are searched, not anchored, as smdebug does.
        """
        if tensor_name in self.tensor_names:
            return True
        return any(re.search(pattern, tensor_name) for pattern in self.include_regex)

    def merged(self, other: SavedCollection) -> SavedCollection:
        """This collection, with what another worker (or a later file) recorded for it added."""
        self.tensor_names = self.tensor_names | other.tensor_names
        self.include_regex = (
            *self.include_regex,
            *(r for r in other.include_regex if r not in self.include_regex),
        )
        return self
