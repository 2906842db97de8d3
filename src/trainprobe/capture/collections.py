"""Collections: named groups of tensors, each with its own save schedule and reductions.

A tensor belongs to a collection when its name is listed in the collection's ``tensor_names``
or when any of the collection's ``include_regex`` patterns is found *anywhere* in the name
(``re.search``, not anchored), as smdebug matches them. A name that matched is remembered in
``tensor_names``, so the collections file lists what each collection really held.

The built-in collections of the PyTorch hook and their patterns are smdebug's (``weights``,
``biases``, ``gradients``, ``losses``, plus ``all`` and ``default``); the collections SageMaker's
built-in rules ask for (``relu_output``, ``relu_input``, ``input_image``, ``input_sequence``)
come with the patterns smdebug-rulesconfig gives them. Scalar collections (``losses``,
``metrics``, ...) always save the raw value: a reduction of a scalar is the scalar.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from trainprobe.capture.json_form import JsonForm
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys

__all__ = [
    "DEFAULT_SAVED_COLLECTIONS",
    "KERAS_COLLECTIONS",
    "PYTORCH_COLLECTIONS",
    "RULE_COLLECTIONS",
    "SCALAR_COLLECTIONS",
    "SCALAR_PREFIX",
    "XGBOOST_COLLECTIONS",
    "Collection",
    "CollectionAccess",
    "CollectionKeys",
    "CollectionSet",
]


class CollectionKeys:
    """The names of the collections smdebug and SageMaker know."""

    DEFAULT = "default"
    ALL = "all"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    BIASES = "biases"
    LAYERS = "layers"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    TENSORFLOW_SUMMARIES = "tensorflow_summaries"
    METRICS = "metrics"
    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"
    # The collections SageMaker's built-in rules configure.
    RELU_OUTPUT = "relu_output"
    RELU_INPUT = "relu_input"
    INPUT_IMAGE = "input_image"
    INPUT_SEQUENCE = "input_sequence"


PYTORCH_COLLECTIONS: dict[str, tuple[str, ...]] = {
    CollectionKeys.ALL: (),
    CollectionKeys.DEFAULT: (),
    CollectionKeys.WEIGHTS: ("^(?!gradient).*weight",),
    CollectionKeys.BIASES: ("^(?!gradient).*bias",),
    CollectionKeys.GRADIENTS: ("^gradient",),
    CollectionKeys.LOSSES: ("[Ll]oss_(?!input).*output",),
}
"""The collections the PyTorch hook always has, with their patterns."""

XGBOOST_COLLECTIONS: dict[str, tuple[str, ...]] = {
    CollectionKeys.ALL: (),
    CollectionKeys.DEFAULT: (),
    CollectionKeys.HYPERPARAMETERS: ("^hyperparameters/.*$",),
    # <evaluation set>-<metric>: train-rmse, validation-logloss, validation_0-error@0.7.
    CollectionKeys.METRICS: ("^[A-Za-z_][A-Za-z0-9_]*-[^/]+$",),
    # The metrics that fall as the model improves (not auc, aucpr, map, ndcg, pre@n).
    CollectionKeys.LOSSES: ("^[A-Za-z_][A-Za-z0-9_]*-(?!(?:auc|aucpr|map|ndcg|pre)(?:@|$))[^/]+$",),
    CollectionKeys.PREDICTIONS: ("^predictions$",),
    CollectionKeys.LABELS: ("^labels$",),
    CollectionKeys.FEATURE_IMPORTANCE: ("^feature_importance/.*",),
    CollectionKeys.AVERAGE_SHAP: ("^average_shap/(?!bias$).*",),
    CollectionKeys.FULL_SHAP: ("^full_shap/(?!bias$).*",),
    CollectionKeys.TREES: ("^trees/.*",),
}
"""The collections the XGBoost hook always has, with their patterns.

smdebug's, except that evaluation sets with digits or underscores (``validation_0``, as the
scikit-learn API names them) are metrics too, the losses leave out every metric that grows as the
model improves, and the SHAP patterns leave out only the ``bias`` term (smdebug's
``[^/bias]$`` also dropped every feature whose name ends in a, b, i or s).
"""

KERAS_COLLECTIONS: dict[str, tuple[str, ...]] = {
    CollectionKeys.ALL: (),
    CollectionKeys.DEFAULT: (),
    CollectionKeys.WEIGHTS: (r"^[^/]+/weights/.*(?<!bias:0)$",),
    CollectionKeys.BIASES: (r"^[^/]+/weights/.*bias:0$",),
    CollectionKeys.GRADIENTS: ("^gradients/",),
    CollectionKeys.LOSSES: (r"^[^/]*loss$",),
    CollectionKeys.METRICS: (r"^(?!.*loss$)[^/]+$",),
    CollectionKeys.SM_METRICS: (),
    CollectionKeys.OPTIMIZER_VARIABLES: (),
    CollectionKeys.INPUTS: (),
    CollectionKeys.OUTPUTS: (),
    CollectionKeys.LAYERS: (),
}
"""The collections the Keras hook always has: smdebug's TensorFlow set, with patterns over the
Keras hook's names (``capture.keras.naming``): a layer's variable is ``<layer>/weights/...:0``
(a bias ends in ``bias:0``), a gradient starts with ``gradients/``, a key of Keras's logs is
one word (a loss ends in ``loss``). The optimizer's variables and ``sm_metrics`` are listed by
name as the hook finds them."""

RULE_COLLECTIONS: dict[str, tuple[str, ...]] = {
    CollectionKeys.RELU_OUTPUT: (".*relu_output",),
    CollectionKeys.RELU_INPUT: (".*relu_input",),
    CollectionKeys.INPUT_IMAGE: (".*hybridsequential0_input_0",),
    CollectionKeys.INPUT_SEQUENCE: (".*embedding0_input_0",),
}
"""Collections created on first use with the patterns SageMaker's rule configs give them."""

SCALAR_COLLECTIONS = frozenset(
    {
        CollectionKeys.LOSSES,
        CollectionKeys.METRICS,
        CollectionKeys.FEATURE_IMPORTANCE,
        CollectionKeys.AVERAGE_SHAP,
        CollectionKeys.SM_METRICS,
        CollectionKeys.TENSORFLOW_SUMMARIES,
    }
)
"""Collections of scalars: always saved raw, never reduced, no histograms."""

SCALAR_PREFIX = "scalar/"
"""What the name of a value saved by ``save_scalar`` starts with (smdebug's): such a value is a
scalar of no collection."""

DEFAULT_SAVED_COLLECTIONS = (CollectionKeys.LOSSES,)
"""Collections the PyTorch hook saves whatever ``include_collections`` says."""

_NOT_NEEDING_PATTERNS = frozenset(PYTORCH_COLLECTIONS) | frozenset(KERAS_COLLECTIONS)


def _patterns(field: str, value: str | Iterable[str]) -> list[str]:
    items = [value] if isinstance(value, str) else list(value)
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(field, item, "a regular expression string")
        try:
            re.compile(item)
        except re.error as error:
            raise ConfigError(field, item, f"a valid regular expression ({error})") from None
    return items


class Collection(JsonForm):
    """A named group of tensors with its patterns, listed names, save and reduction configs.

    ``save_config``/``reduction_config`` left as None take the hook's. ``include`` adds patterns.
    """

    def __init__(
        self,
        name: str,
        include_regex: Iterable[str] | None = None,
        tensor_names: Iterable[str] | None = None,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | Mapping[ModeKeys, SaveConfigMode] | None = None,
        save_histogram: bool = True,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError("Collection.name", name, "a non-empty string")
        self.name = name
        self.include_regex: list[str] = _patterns(
            "Collection.include_regex", include_regex if include_regex is not None else []
        )
        self.tensor_names: set[str] = set(tensor_names or ())
        self.revision = 0
        self._reduction_config: ReductionConfig | None = None
        self._save_config: SaveConfig | None = None
        self.reduction_config = reduction_config
        self.save_config = save_config  # type: ignore[assignment]
        self.save_histogram = save_histogram
        self.modules: dict[object, tuple[bool, bool]] = {}
        self._compiled: list[re.Pattern[str]] | None = None

    @property
    def reduction_config(self) -> ReductionConfig | None:
        """What is saved of each tensor; None means the hook's reduction config."""
        return self._reduction_config

    @reduction_config.setter
    def reduction_config(self, value: ReductionConfig | None) -> None:
        if value is not None and not isinstance(value, ReductionConfig):
            raise ConfigError(
                f"Collection({self.name!r}).reduction_config", value, "a ReductionConfig"
            )
        self._reduction_config = value
        self.revision += 1

    @property
    def save_config(self) -> SaveConfig | None:
        """When the collection is saved; None means the hook's save config."""
        return self._save_config

    @save_config.setter
    def save_config(self, value: SaveConfig | Mapping[ModeKeys, SaveConfigMode] | None) -> None:
        if value is None or isinstance(value, SaveConfig):
            self._save_config = value
        elif isinstance(value, Mapping):
            self._save_config = SaveConfig(mode_save_configs=value)
        elif isinstance(value, SaveConfigMode):
            self._save_config = SaveConfig.parse(value)
        else:
            raise ConfigError(
                f"Collection({self.name!r}).save_config",
                value,
                "a SaveConfig or a dict of mode to SaveConfigMode",
            )
        self.revision += 1

    def include(self, pattern: str | Iterable[str]) -> None:
        """Add one pattern (or a list of them) that tensor names are searched for; no repeats."""
        for item in _patterns(f"Collection({self.name!r}).include", pattern):
            if item not in self.include_regex:
                self.include_regex.append(item)
        self._compiled = None
        self.revision += 1

    def add_tensor_name(self, name: str) -> None:
        """List ``name`` explicitly as a member."""
        if name not in self.tensor_names:
            self.tensor_names.add(name)
            self.revision += 1

    def has_tensor_name(self, name: str) -> bool:
        """Whether ``name`` is listed (explicitly or because it matched before)."""
        return name in self.tensor_names

    def remove_tensor_name(self, name: str) -> None:
        """Stop listing ``name`` (a pattern may still match it)."""
        self.tensor_names.discard(name)

    def add_module_tensors(
        self, module: object, inputs: bool = False, outputs: bool = True
    ) -> None:
        """Add a module's inputs and/or outputs by module (resolved to names when registered)."""
        self.modules[module] = (inputs, outputs)
        self.revision += 1

    def matches(self, name: str) -> bool:
        """Whether a tensor of this name belongs here: listed, or a pattern found in it."""
        if name in self.tensor_names:
            return True
        if self._compiled is None:
            self._compiled = [re.compile(pattern) for pattern in self.include_regex]
        return any(pattern.search(name) for pattern in self._compiled)

    def needs_patterns(self) -> bool:
        """Whether this collection would hold nothing: no pattern, no name, not built in."""
        if self.name in _NOT_NEEDING_PATTERNS:
            return False
        return not (self.include_regex or self.tensor_names or self.modules)

    def to_json_dict(self) -> dict[str, Any]:
        """The collection as the collections file writes it."""
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted(self.tensor_names),
            "reduction_config": (
                self.reduction_config.to_json_dict() if self.reduction_config is not None else None
            ),
            "save_config": self.save_config.to_json_dict()
            if self.save_config is not None
            else None,
            "save_histogram": self.save_histogram,
        }

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> Collection:
        """Read one entry of a collections file."""
        if not isinstance(params, Mapping):
            raise ConfigError("collection", params, "a dictionary")
        reduction = params.get("reduction_config")
        save = params.get("save_config")
        return cls(
            name=params.get("name", ""),
            include_regex=params.get("include_regex") or [],
            tensor_names=params.get("tensor_names") or [],
            reduction_config=ReductionConfig.from_dict(reduction) if reduction else None,
            save_config=SaveConfig.from_dict(save) if save else None,
            save_histogram=bool(params.get("save_histogram", True)),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Collection):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Collection(name={self.name!r}, include_regex={self.include_regex!r})"


class CollectionSet:
    """The collections of one hook, by name, starting from a framework's built-in ones."""

    def __init__(self, builtin: Mapping[str, tuple[str, ...]] = PYTORCH_COLLECTIONS) -> None:
        self._collections: dict[str, Collection] = {
            name: Collection(name, include_regex=patterns) for name, patterns in builtin.items()
        }
        self._added = 0

    def get(self, name: str, create: bool = True) -> Collection:
        """The collection ``name``; created (with its rule pattern, if it has one) if missing."""
        found = self._collections.get(name)
        if found is not None:
            return found
        if not create:
            raise KeyError(name)
        collection = Collection(name, include_regex=RULE_COLLECTIONS.get(name, ()))
        self.add(collection)
        return collection

    def select(
        self,
        include_collections: Iterable[str] | str | None,
        include_regex: Iterable[str] | str | None,
        save_all: bool,
    ) -> list[str]:
        """The names of the collections a hook given these arguments saves, each made here:
        ``include_regex`` adds its patterns to ``default``, ``save_all`` includes ``all``."""
        if isinstance(include_collections, str):
            include_collections = [include_collections]
        included = list(include_collections) if include_collections is not None else []
        if include_regex is not None:
            patterns = [include_regex] if isinstance(include_regex, str) else list(include_regex)
            self.get(CollectionKeys.DEFAULT).include(patterns)
            included.append(CollectionKeys.DEFAULT)
        if save_all:
            self.get(CollectionKeys.ALL).include(".*")
            included.append(CollectionKeys.ALL)
        for name in included:
            self.get(name)
        return included

    def add(self, collection: Collection) -> None:
        """Add (or replace) a collection under its name."""
        if not isinstance(collection, Collection):
            raise ConfigError("collection", collection, "a Collection")
        self._collections[collection.name] = collection
        self._added += 1

    def __contains__(self, name: object) -> bool:
        return name in self._collections

    def __iter__(self) -> Iterator[Collection]:
        return iter(list(self._collections.values()))

    def __len__(self) -> int:
        return len(self._collections)

    def names(self) -> list[str]:
        """The names of every collection, in the order they were made."""
        return list(self._collections)

    @property
    def revision(self) -> int:
        """A number that changes when a collection is added or its patterns or configs change."""
        return self._added + sum(c.revision for c in self._collections.values())

    def to_json_dict(self) -> dict[str, dict[str, Any]]:
        """``{name: collection}`` as the ``collections`` object of a collections file."""
        return {name: c.to_json_dict() for name, c in self._collections.items()}


class CollectionAccess:
    """smdebug's collection calls, the same on every hook (PyTorch, Keras, XGBoost), over the
    hook's ``collections``."""

    collections: CollectionSet

    def get_collection(self, name: str, create: bool = True) -> Collection:
        """The collection ``name`` (created if missing and ``create``); ``.include(regex)`` it."""
        return self.collections.get(name, create=create)

    def get_collections(self) -> dict[str, Collection]:
        """Every collection of this hook, by name."""
        return {collection.name: collection for collection in self.collections}

    def add_collection(self, collection: Collection) -> None:
        """Add a collection built by hand (it is saved if named in ``include_collections``)."""
        self.collections.add(collection)
