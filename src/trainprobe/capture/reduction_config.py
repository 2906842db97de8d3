"""What is saved of a tensor: the tensor itself, its shape, and/or small reductions of it.

A reduction is a scalar computed from a tensor (``min``, ``max``, ``mean``, ``std``,
``variance``, ``sum``, ``prod``) or a norm (``l1``, ``l2``); each may be taken of the tensor's
absolute values instead. Saving reductions instead of raw tensors keeps the output small.

The string form, used by SageMaker's ``reductions`` parameter and the collections file, is a
comma-separated list: ``"min,max,abs_mean,l2_norm,abs_l1_norm"``. Norms carry a ``_norm`` suffix
there, and absolute variants an ``abs_`` prefix. ``median`` appears in SageMaker's documentation
but smdebug never accepted it (its reader would reject a collections file naming it), so it is
refused here with that explanation.

``std`` and ``variance`` are the population statistics (divided by n), as numpy computes them,
so a saved reduction equals the one a trial computes from the raw tensor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trainprobe.capture.json_form import JsonForm
from trainprobe.config.errors import ConfigError, closest
from trainprobe.config.true_false import true_or_false

__all__ = ["ALLOWED_NORMS", "ALLOWED_REDUCTIONS", "ReductionConfig"]

ALLOWED_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
ALLOWED_NORMS = ("l1", "l2")

_MEDIAN = "median is listed in SageMaker's documentation but smdebug's reader rejects it"
_SPELLINGS = (
    *ALLOWED_REDUCTIONS,
    *(f"{norm}_norm" for norm in ALLOWED_NORMS),
    *(f"abs_{name}" for name in ALLOWED_REDUCTIONS),
    *(f"abs_{norm}_norm" for norm in ALLOWED_NORMS),
)


def _as_bool(field: str, value: object) -> bool:
    parsed = true_or_false(value)
    if parsed is None:
        raise ConfigError(field, value, "True or False (or the strings 'true'/'false')")
    return parsed


def _names(field: str, values: Iterable[str] | None, allowed: tuple[str, ...]) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        raise ConfigError(field, values, f"a list of names from {', '.join(allowed)}")
    names = list(values)
    for name in names:
        if name not in allowed:
            hint = f" ({_MEDIAN})" if name == "median" else ""
            suggestion = closest(name, allowed) if isinstance(name, str) else None
            raise ConfigError(
                field, name, f"one of {', '.join(allowed)}{hint}", suggestion=suggestion
            )
    return names


class ReductionConfig(JsonForm):
    """The reductions, norms, raw tensor and shape to save for the tensors of a collection.

    ``reductions`` and ``abs_reductions`` take names from min, max, mean, std, variance, sum,
    prod; ``norms`` and ``abs_norms`` take l1 and l2. ``save_raw_tensor`` saves the tensor itself
    and ``save_shape`` records its shape in the index. Immutable once built.
    """

    __slots__ = (
        "abs_norms",
        "abs_reductions",
        "norms",
        "reductions",
        "save_raw_tensor",
        "save_shape",
    )

    def __init__(
        self,
        reductions: Iterable[str] | None = None,
        abs_reductions: Iterable[str] | None = None,
        norms: Iterable[str] | None = None,
        abs_norms: Iterable[str] | None = None,
        save_raw_tensor: bool | str = False,
        save_shape: bool | str = False,
    ) -> None:
        field = "ReductionConfig"
        self.reductions = _names(f"{field}.reductions", reductions, ALLOWED_REDUCTIONS)
        self.abs_reductions = _names(f"{field}.abs_reductions", abs_reductions, ALLOWED_REDUCTIONS)
        self.norms = _names(f"{field}.norms", norms, ALLOWED_NORMS)
        self.abs_norms = _names(f"{field}.abs_norms", abs_norms, ALLOWED_NORMS)
        self.save_raw_tensor = _as_bool(f"{field}.save_raw_tensor", save_raw_tensor)
        self.save_shape = _as_bool(f"{field}.save_shape", save_shape)

    def requested(self) -> list[tuple[str, bool]]:
        """Every (operation, of absolute values) pair asked for, without repeats, in order.

        Norms appear as ``l1``/``l2``: the names reductions are stored under.
        """
        pairs = [(name, False) for name in (*self.reductions, *self.norms)]
        pairs += [(name, True) for name in (*self.abs_reductions, *self.abs_norms)]
        return list(dict.fromkeys(pairs))

    @property
    def reductions_string(self) -> str:
        """The comma-separated form: ``"min,l2_norm,abs_mean,abs_l1_norm"``."""
        parts = [*self.reductions, *(f"{name}_norm" for name in self.norms)]
        parts += [f"abs_{name}" for name in self.abs_reductions]
        parts += [f"abs_{name}_norm" for name in self.abs_norms]
        return ",".join(parts)

    @classmethod
    def parse(
        cls, reductions: str, *, save_raw_tensor: bool | str = False, save_shape: bool | str = False
    ) -> ReductionConfig:
        """A config from the comma-separated form, e.g. ``"min,max,abs_l2_norm"``."""
        if not isinstance(reductions, str):
            raise ConfigError("reductions", reductions, "a comma-separated string of reductions")
        plain: list[str] = []
        absolute: list[str] = []
        norms: list[str] = []
        abs_norms: list[str] = []
        for item in (part.strip() for part in reductions.split(",")):
            if not item:
                continue
            name, is_abs = (item[4:], True) if item.startswith("abs_") else (item, False)
            is_norm = name.endswith("_norm")
            name = name[: -len("_norm")] if is_norm else name
            allowed = ALLOWED_NORMS if is_norm else ALLOWED_REDUCTIONS
            if name not in allowed:
                hint = f" ({_MEDIAN})" if name == "median" else ""
                raise ConfigError(
                    "reductions",
                    item,
                    f"comma-separated names from {', '.join(_SPELLINGS)}{hint}",
                    suggestion=closest(item, _SPELLINGS),
                )
            target = (
                (abs_norms if is_abs else norms) if is_norm else (absolute if is_abs else plain)
            )
            target.append(name)
        return cls(plain, absolute, norms, abs_norms, save_raw_tensor, save_shape)

    def to_json_dict(self) -> dict[str, Any]:
        """The config as the collections file writes it."""
        return {
            "save_raw_tensor": self.save_raw_tensor,
            "reductions": self.reductions_string,
            "save_shape": self.save_shape,
        }

    @classmethod
    def from_dict(cls, params: Mapping[str, Any] | None) -> ReductionConfig | None:
        """Read ``{"reductions": "...", "save_raw_tensor": ..., "save_shape": ...}``.

        Other keys (a hook's or collection's parameters) are ignored, so a whole parameter
        dictionary can be passed.
        """
        if params is None:
            return None
        return cls.parse(
            params.get("reductions", "") or "",
            save_raw_tensor=params.get("save_raw_tensor", False),
            save_shape=params.get("save_shape", False),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReductionConfig):
            return NotImplemented
        return (
            self.reductions == other.reductions
            and self.abs_reductions == other.abs_reductions
            and self.norms == other.norms
            and self.abs_norms == other.abs_norms
            and self.save_raw_tensor == other.save_raw_tensor
            and self.save_shape == other.save_shape
        )

    def __hash__(self) -> int:
        return hash((self.reductions_string, self.save_raw_tensor, self.save_shape))

    def __repr__(self) -> str:
        return (
            f"ReductionConfig(reductions={self.reductions}, abs_reductions={self.abs_reductions}, "
            f"norms={self.norms}, abs_norms={self.abs_norms}, "
            f"save_raw_tensor={self.save_raw_tensor}, save_shape={self.save_shape})"
        )
