"""Which tensors a built-in rule looks at: collections and name patterns, as SageMaker's rules do.

Many rules take ``collection_names`` and ``tensor_regex``; they inspect the union of both sets.
A collection matches a tensor by the names and patterns in the job's collections file; a pattern
is searched anywhere in the name (not anchored), as smdebug's trial does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from trainprobe.analysis.read_log import ReadLog
from trainprobe.analysis.trial import Trial

__all__ = ["LOSS_PATTERN", "TensorSelection", "loss_selection"]

LOSS_PATTERN = re.compile(r"(?i)loss(?!.*input)")
"""Names that look like a loss (``CrossEntropyLoss_output_0``, ``loss_0``, ``train-loss``), for
output that has no ``losses`` collection; a module's inputs are left out."""


@dataclass(frozen=True)
class TensorSelection:
    """Tensors chosen by collection and by name pattern; ``everything`` when neither is given."""

    collections: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()
    everything: bool = False
    module_types: frozenset[str] = frozenset()
    side: str = "output"
    """With ``module_types``: the ``<module>_<side>_<i>`` tensors of modules of those
    ``torch.nn`` types (``trial.module_nn_type``), whatever the modules are named."""

    def is_empty(self) -> bool:
        """Whether the selection names no collection and no pattern (and is not everything)."""
        return not (self.collections or self.patterns or self.everything or self.module_types)

    def names(self, trial: Trial, step: int) -> list[str]:
        """The names of the selected tensors saved at global ``step``, sorted."""
        return self.filter(trial, trial.tensor_names(step=step))

    def filter(self, trial: Trial, names: Sequence[str]) -> list[str]:
        """The selected names among ``names``, sorted."""
        if self.everything and not (self.collections or self.patterns):
            return sorted(names)
        known = trial.collections()
        log = trial.read_log
        if log is not None and self.module_types:
            # Name patterns and module types are alternatives: one that found the activations
            # makes the others' silence no news.
            log = ReadLog()
        chosen: set[str] = set()
        for collection_name in self.collections:
            collection = known.get(collection_name)
            members = [] if collection is None else [n for n in names if collection.matches(n)]
            chosen.update(members)
            if log is not None:
                log.looked_for("collection", collection_name, bool(members))
        for pattern in self.patterns:
            members = [name for name in names if pattern.search(name)]
            chosen.update(members)
            if log is not None:
                log.looked_for("pattern", pattern.pattern, bool(members))
        if self.module_types:
            suffix = f"_{self.side}_"
            members = [
                name
                for name in names
                if suffix in name and trial.module_nn_type(name) in self.module_types
            ]
            chosen.update(members)
            if log is not None:
                log.looked_for("module", self._modules_in_words(), bool(members))
            if trial.read_log is not None and log is not None:
                for lookup in log.lookups:
                    trial.read_log.looked_for(lookup.kind, lookup.text, bool(chosen))
        return sorted(chosen)

    def _modules_in_words(self) -> str:
        kinds = sorted(self.module_types)
        if len(kinds) > 3:
            return f"{self.side}s of activation modules ({', '.join(kinds[:3])}, ...)"
        return f"{self.side}s of {', '.join(kinds)} modules"

    def describe(self) -> str:
        """What was asked for, in words: ``collection gradients or names matching .*relu``."""
        if self.everything and not (self.collections or self.patterns):
            return "any tensor"
        parts = []
        if self.collections:
            word = "collection" if len(self.collections) == 1 else "collections"
            parts.append(f"{word} {', '.join(self.collections)}")
        if self.patterns:
            parts.append("names matching " + " or ".join(p.pattern for p in self.patterns))
        if self.module_types:
            parts.append(self._modules_in_words())
        return " or ".join(parts)


def loss_selection(trial: Trial) -> TensorSelection:
    """The job's losses: its ``losses`` collection, else the names that look like a loss."""
    if "losses" in trial.collections():
        return TensorSelection(collections=("losses",))
    return TensorSelection(patterns=(LOSS_PATTERN,))
