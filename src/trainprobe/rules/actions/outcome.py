"""``ActionOutcome``: what became of one action, written into the rule's output."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ActionOutcome"]


@dataclass(frozen=True)
class ActionOutcome:
    """One action's result: which kind, aimed where, whether it worked, and what happened."""

    action: str
    target: str
    ok: bool
    detail: str
    time: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        """The outcome as one line of ``actions.jsonl``."""
        return {
            "action": self.action,
            "target": self.target,
            "ok": self.ok,
            "detail": self.detail,
            "time": self.time,
        }
