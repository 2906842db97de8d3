"""A job's saved tensors as the Tensors page shows them, read through the job's trial.

``tensor_index`` lists every tensor by collection; ``tensor_history`` gives one tensor's
reductions over its saved steps (mean, min, max and the norms; from its saved value where
there is one, else from the reductions the hook saved) and its distribution over steps (one
histogram per step on shared bins, as TensorBoard's distribution view); ``tensor_at`` gives its
value at one step, whole when it is small, as a histogram when it is not. Names come from the
trial's own list: a name a request makes up is simply not found, and never becomes a path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainprobe.analysis.exceptions import TensorUnavailableForStep
from trainprobe.analysis.trial import Trial
from trainprobe.report.series import rounded
from trainprobe.storage.modes import ModeKeys

__all__ = [
    "HISTOGRAM_BINS",
    "SMALL_TENSOR",
    "Reductions",
    "tensor_at",
    "tensor_history",
    "tensor_index",
]

HISTOGRAM_BINS = 40
HISTOGRAM_STEPS = 60
"""Steps drawn in a tensor's distribution over steps, at most (evenly spread)."""
SMALL_TENSOR = 400
"""Elements up to which a value is shown whole."""

_REDUCTIONS = ("mean", "min", "max", "l1", "l2")


def tensor_index(trial: Trial) -> dict[str, Any]:
    """Every saved tensor's name, and the tensors of each collection."""
    collections = {
        name: trial.tensor_names(collection=name) for name in sorted(trial.collections())
    }
    return {
        "tensors": trial.tensor_names(),
        "collections": {name: names for name, names in collections.items() if names},
    }


def _reductions(trial: Trial, name: str, step: int) -> dict[str, float] | None:
    """The tensor's reductions at ``step``: computed from its value, else the saved ones."""
    tensor = trial.tensor(name)
    try:
        value = np.asarray(tensor.value(step), dtype=np.float64)
    except TensorUnavailableForStep:
        saved = tensor.reduction_values(step)
        found = {op: float(value) for (op, is_abs), value in saved.items() if not is_abs}
        return {op: found[op] for op in _REDUCTIONS if op in found} or None
    if value.size == 0:
        return None
    flat = value.reshape(-1)
    return {
        "mean": float(flat.mean()),
        "min": float(flat.min()),
        "max": float(flat.max()),
        "l1": float(np.abs(flat).sum()),
        "l2": float(np.sqrt((flat * flat).sum())),
    }


Reductions = dict[int, tuple[str, dict[str, float]]]
"""A tensor's reductions by global step, with the step's mode."""


def tensor_history(
    trial: Trial, name: str, known: Reductions | None = None
) -> dict[str, Any] | None:
    """Tensor ``name``'s reductions at each saved step, each mode apart, and its distribution
    over steps; None when the trial has no such tensor. ``known`` keeps the reductions read so
    far between calls, so that only new steps are read."""
    if name not in trial.tensor_names():
        return None
    known = {} if known is None else known
    steps = trial.tensor(name).steps()
    for step in steps:
        if step not in known:
            found = _reductions(trial, name, step)
            if found is not None:
                known[step] = ((trial.mode(step) or ModeKeys.GLOBAL).name, found)
    modes: dict[str, dict[str, list[Any]]] = {}
    for step in steps:
        if step not in known:
            continue
        mode, found = known[step]
        series = modes.setdefault(mode, {"steps": [], **{op: [] for op in _REDUCTIONS}})
        series["steps"].append(step)
        for op in _REDUCTIONS:
            series[op].append(found.get(op))
    return {
        "tensor": name,
        "modes": {mode: _rounded_series(series) for mode, series in modes.items()},
        "distribution": _distribution(trial, name, steps),
    }


def _rounded_series(series: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return {
        key: values if key == "steps" else rounded([np.nan if v is None else v for v in values])
        for key, values in series.items()
    }


def _distribution(trial: Trial, name: str, steps: list[int]) -> dict[str, Any] | None:
    """Histograms of the tensor's values at up to ``HISTOGRAM_STEPS`` steps, on shared bins."""
    if len(steps) > HISTOGRAM_STEPS:
        picked = np.unique(np.linspace(0, len(steps) - 1, HISTOGRAM_STEPS).round().astype(int))
        steps = [steps[index] for index in picked]
    tensor = trial.tensor(name)
    values: dict[int, np.ndarray] = {}
    for step in steps:
        try:
            value = np.asarray(tensor.value(step), dtype=np.float64).reshape(-1)
        except TensorUnavailableForStep:
            continue
        finite = value[np.isfinite(value)]
        if finite.size:
            values[step] = finite
    if not values:
        return None
    low = min(float(value.min()) for value in values.values())
    high = max(float(value.max()) for value in values.values())
    if high <= low:
        high = low + 1.0
    edges = np.linspace(low, high, HISTOGRAM_BINS + 1)
    counts = [np.histogram(value, bins=edges)[0].tolist() for value in values.values()]
    return {"steps": list(values), "edges": rounded(edges), "counts": counts}


def tensor_at(trial: Trial, name: str, step: int) -> dict[str, Any] | None:
    """Tensor ``name`` at global ``step``: its shape and, up to ``SMALL_TENSOR`` elements,
    its values as rows (a matrix); above, a histogram. None when it was not saved there."""
    if name not in trial.tensor_names() or step not in trial.tensor(name).steps():
        return None
    try:
        value = np.asarray(trial.tensor(name).value(step), dtype=np.float64)
    except TensorUnavailableForStep:
        return {"tensor": name, "step": step, "shape": None, "saved": "reductions only"}
    shape = list(value.shape)
    result: dict[str, Any] = {"tensor": name, "step": step, "shape": shape}
    if value.size <= SMALL_TENSOR:
        rows = value.reshape(1, -1) if value.ndim < 2 else value.reshape(-1, value.shape[-1])
        result["rows"] = [rounded(row) for row in rows]
        return result
    finite = value[np.isfinite(value)]
    counts, edges = np.histogram(finite if finite.size else [0.0], bins=HISTOGRAM_BINS)
    if not finite.size:
        counts = np.zeros_like(counts)
    result["histogram"] = {"edges": rounded(edges), "counts": [int(count) for count in counts]}
    result["nonFinite"] = int(value.size - finite.size)
    return result
