"""Which collections a hook saves, which are due at a step, and what to save of each tensor.

The plan is built once (and again only when a collection changes): each saved collection gets
its effective save config (its own, with open modes filled from the hook's) and reduction
config (its own or the hook's; raw for scalar collections). At each step the hook asks once
which collections are due (``due``, a bit mask); for a tensor it then asks ``what_to_save``,
whose answer is cached by the set of due collections the tensor belongs to, so a save step
costs a dictionary lookup per tensor after the first. The answer also says what TensorBoard
gets of the tensor (``summary``), decided by the same collections, so the export costs nothing more
per tensor.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from trainprobe.capture.collections import (
    DEFAULT_SAVED_COLLECTIONS,
    SCALAR_COLLECTIONS,
    Collection,
    CollectionKeys,
    CollectionSet,
)
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig
from trainprobe.capture.tensorboard_export import Summary, summary_for
from trainprobe.config.errors import ConfigError, closest
from trainprobe.storage.modes import ModeKeys

__all__ = ["SavePlan", "TensorPlan"]

log = logging.getLogger("trainprobe")

_TRAIN_ONLY = frozenset({CollectionKeys.GRADIENTS, CollectionKeys.OPTIMIZER_VARIABLES})
_RAW = ReductionConfig(save_raw_tensor=True)


@dataclass(frozen=True)
class TensorPlan:
    """What to save of one tensor at one step, and its TensorBoard summary if exported."""

    raw: bool
    shape: bool
    reductions: tuple[tuple[str, bool], ...]
    summary: Summary | None = None

    @property
    def anything(self) -> bool:
        """Whether anything at all is saved."""
        return self.raw or self.shape or bool(self.reductions)


_NOTHING = TensorPlan(raw=False, shape=False, reductions=())


class SavePlan:
    """The saved collections of a hook and the per-step, per-tensor decisions over them.

    ``always_saved`` are the collections saved whatever ``include_collections`` says (the
    framework's default: ``losses`` for PyTorch, ``metrics`` for XGBoost).
    """

    def __init__(
        self,
        collections: CollectionSet,
        include_collections: Iterable[str] | None,
        save_config: SaveConfig,
        reduction_config: ReductionConfig,
        always_saved: Iterable[str] = DEFAULT_SAVED_COLLECTIONS,
    ) -> None:
        self.collections = collections
        names = list(include_collections) if include_collections is not None else []
        self.included = list(dict.fromkeys([*names, *always_saved]))
        self.save_config = save_config
        self.reduction_config = reduction_config
        self.saved: list[Collection] = []
        self.revision = -1
        self.answers = 0
        """Counts the times the plan's answers may have changed (prepared, a name forgotten)."""
        self._members: dict[str, int] = {}
        self._plans: dict[int, TensorPlan] = {}
        self._train_only_mask = 0

    def include(self, name: str) -> None:
        """Save collection ``name`` too."""
        if name not in self.included:
            self.included.append(name)
            self.revision = -1

    def is_stale(self) -> bool:
        """Whether a collection changed since the plan was prepared."""
        return self.revision != self.collections.revision

    def prepare(self, *, strict: bool = False) -> None:
        """Work out the saved collections and their effective configs.

        A saved collection with no pattern yet (a new name) is saved as smdebug saves it:
        empty until ``save_tensor`` fills it (said in the log). A name near another
        collection's is likely a typo: a warning naming it, or with ``strict`` a ConfigError.
        """
        save_everything = CollectionKeys.ALL in self.included
        saved = []
        for collection in self.collections:
            if not save_everything and collection.name not in self.included:
                continue
            if collection.needs_patterns():
                # As in smdebug: saved, holding what save_tensor puts in it.
                suggestion = closest(
                    collection.name,
                    [name for name in self.collections.names() if name != collection.name],
                )
                if strict and suggestion is not None:
                    raise ConfigError(
                        f"collection {collection.name!r}",
                        collection.include_regex,
                        "at least one include_regex pattern or tensor name for a new collection",
                        suggestion=suggestion,
                    )
                log.log(
                    logging.WARNING if suggestion else logging.INFO,
                    "trainprobe: collection %r has no pattern or tensor name yet; it saves what "
                    "save_tensor puts in it%s",
                    collection.name,
                    f". Did you mean {suggestion!r}?" if suggestion else "",
                )
            saved.append(collection)
        for collection in self.collections:
            own = collection.save_config
            collection.save_config = (
                self.save_config if own is None else own.merged_with(self.save_config)
            )
            if collection.name in SCALAR_COLLECTIONS:
                collection.reduction_config = _RAW
                collection.save_histogram = False
            elif collection.reduction_config is None:
                collection.reduction_config = self.reduction_config
        self.saved = saved
        self._train_only_mask = sum(
            1 << index for index, c in enumerate(saved) if c.name in _TRAIN_ONLY
        )
        self._members.clear()
        self._plans.clear()
        self.revision = self.collections.revision
        self.answers += 1

    def due(self, mode: ModeKeys, mode_step: int) -> int:
        """The saved collections due at ``mode_step`` of ``mode``, as a bit mask (0: none)."""
        mask = 0
        for index, collection in enumerate(self.saved):
            config = collection.save_config
            if config is not None and config.should_save_step(mode, mode_step):
                mask |= 1 << index
        if mode in (ModeKeys.EVAL, ModeKeys.PREDICT):
            mask &= ~self._train_only_mask
        return mask

    def membership(self, name: str) -> int:
        """The saved collections holding tensor ``name``, as a bit mask; remembered per name."""
        found = self._members.get(name)
        if found is None:
            found = 0
            for index, collection in enumerate(self.saved):
                if collection.matches(name):
                    collection.tensor_names.add(name)  # a match: membership unchanged
                    found |= 1 << index
            self._members[name] = found
        return found

    def forget(self, name: str) -> None:
        """Work out the membership of ``name`` again (it was added to a collection)."""
        known = self._members.pop(name, None)
        if known is not None and self.membership(name) != known:
            self.answers += 1

    def what_to_save(self, name: str, due: int) -> TensorPlan:
        """What to save of tensor ``name`` when the collections in ``due`` are due."""
        mask = self.membership(name) & due
        if not mask:
            return _NOTHING
        plan = self._plans.get(mask)
        if plan is None:
            plan = self._combine(mask)
            self._plans[mask] = plan
        return plan

    def holds_any(self, names: Iterable[str], due: int) -> bool:
        """Whether a collection in ``due`` holds any of ``names`` (nothing is remembered: the
        names need not be tensors of this training)."""
        collections = self.collections_in(due)
        return any(c.matches(name) for name in names for c in collections)

    def collections_in(self, mask: int) -> list[Collection]:
        """The saved collections of a bit mask."""
        return [c for index, c in enumerate(self.saved) if mask & (1 << index)]

    def _combine(self, mask: int) -> TensorPlan:
        raw = shape = False
        reductions: dict[tuple[str, bool], None] = {}
        collections = self.collections_in(mask)
        for collection in collections:
            config = collection.reduction_config or self.reduction_config
            raw = raw or config.save_raw_tensor
            shape = shape or config.save_shape
            if collection.name not in SCALAR_COLLECTIONS:
                reductions.update(dict.fromkeys(config.requested()))
        return TensorPlan(
            raw=raw,
            shape=shape,
            reductions=tuple(reductions),
            summary=summary_for(collections),
        )
