"""``to_json`` / ``from_json``: smdebug's string forms of its configuration objects.

``SaveConfig``, ``ReductionConfig`` and ``Collection`` each define their dictionary form
(``to_json_dict`` / ``from_dict``, what the collections file holds); this mixin gives them the
JSON string form smdebug's code and tests use, from that one definition.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Self

__all__ = ["JsonForm"]


class JsonForm:
    """The JSON string form of an object that has ``to_json_dict`` and ``from_dict``."""

    def to_json_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> Self | None:
        raise NotImplementedError

    def to_json(self) -> str:
        """``to_json_dict()`` as a JSON string."""
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_json(cls, json_str: str) -> Self | None:
        """The object a ``to_json()`` string describes."""
        return cls.from_dict(json.loads(json_str))
