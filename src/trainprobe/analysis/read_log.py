"""``ReadLog``: what was read from a trial and what was asked of it, while someone watches.

A rule's verdict must say what it checked. The rule runner hands the trial a log for the length
of one evaluation (``Trial.watch``); the trial notes each tensor whose value, reduction or shape
was read, and each lookup (an exact name, a name pattern, a collection) with whether it found
anything. A lookup that never found anything over a whole run is a pattern that matched
nothing, which the verdict reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Lookup", "ReadLog"]


@dataclass(frozen=True)
class Lookup:
    """One thing looked for: ``kind`` is "tensor" (an exact name), "pattern" (a regex searched in
    names), "collection" or "module" (tensors of modules of a type); ``text`` is the name,
    pattern, collection, or the module tensors in words."""

    kind: str
    text: str

    def describe(self) -> str:
        """The lookup in words: ``tensor 'x'``, ``names matching '.*relu_output'``."""
        if self.kind == "pattern":
            return f"names matching {self.text!r}"
        if self.kind == "module":
            return self.text
        return f"{self.kind} {self.text!r}"


@dataclass
class ReadLog:
    """The tensors read and the lookups made (with whether each ever found a tensor)."""

    tensors_read: set[str] = field(default_factory=set)
    lookups: dict[Lookup, bool] = field(default_factory=dict)

    def read(self, name: str) -> None:
        """Tensor ``name`` was read (a value, a reduction or a shape)."""
        self.tensors_read.add(name)

    def looked_for(self, kind: str, text: str, found: bool) -> None:
        """A lookup was made; ``found`` says whether it matched a saved tensor."""
        key = Lookup(kind, text)
        self.lookups[key] = self.lookups.get(key, False) or found

    def merge(self, other: ReadLog) -> None:
        """Add what ``other`` saw."""
        self.tensors_read |= other.tensors_read
        for key, found in other.lookups.items():
            self.lookups[key] = self.lookups.get(key, False) or found

    def unmatched(self) -> list[Lookup]:
        """The lookups that never found a tensor, in the order they were first made."""
        return [key for key, found in self.lookups.items() if not found]
