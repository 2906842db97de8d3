"""What the save plan says of a batch of tensors captured together, remembered per batch.

The hook captures the same tensors at every save step, under the same names: a model's
parameters when the step starts, their gradients when it ends. What to save of each, which of
them are reduced together and the names of their reductions depend only on the names, the
collections due, whether the step is saved in full, and the plan's answers. A ``BatchLayout``
holds them, made the first time a batch is seen, so that a step asks the plan nothing and only
checks the tensors themselves (empty, not dense, complex).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainprobe.capture.save_plan import SavePlan, TensorPlan
from trainprobe.storage.reduction_names import reduction_tensor_name

__all__ = ["BatchLayout", "BatchLayouts", "Ops"]

Ops = tuple[tuple[str, bool], ...]
"""Reductions: (name, of the absolute values)."""

_KEPT = 64


@dataclass(frozen=True)
class BatchLayout:
    """The plan's answers for a batch of names, by the names' positions."""

    plans: tuple[TensorPlan, ...]
    wanted: tuple[int, ...]
    """The tensors of which anything is saved."""
    stored: tuple[int, ...]
    """The tensors the writer gets something of: raw values or a shape."""
    summarised: tuple[int, ...]
    """``stored`` and those with a TensorBoard summary, for a hook that exports them."""
    reduced: dict[Ops, tuple[tuple[int, ...], list[tuple[str, ...]]]]
    """Per reductions asked for, the tensors reduced by them and their reductions' names."""


class BatchLayouts:
    """The layouts of the batches a hook has captured (a few: training, evaluation)."""

    def __init__(self, plan: SavePlan) -> None:
        self.plan = plan
        self._layouts: dict[tuple[tuple[str, ...], int, bool, int], BatchLayout] = {}

    def of(self, names: tuple[str, ...], due: int, full: bool) -> BatchLayout:
        """The layout of ``names`` at a step with collections ``due`` due (``full``: the step
        saves every tensor raw)."""
        key = (names, due, full, self.plan.answers)
        layout = self._layouts.get(key)
        if layout is None:
            if len(self._layouts) >= _KEPT:
                self._layouts.clear()
            layout = self._layouts[key] = self._make(names, due, full)
        return layout

    def _make(self, names: tuple[str, ...], due: int, full: bool) -> BatchLayout:
        plans = []
        reduced: dict[Ops, tuple[list[int], list[tuple[str, ...]]]] = {}
        for index, name in enumerate(names):
            plan = self.plan.what_to_save(name, due)
            if full and not plan.raw:
                plan = replace(plan, raw=True)
            plans.append(plan)
            if plan.anything and plan.reductions:
                indices, reduction_names = reduced.setdefault(plan.reductions, ([], []))
                indices.append(index)
                reduction_names.append(
                    tuple(reduction_tensor_name(op, name, of_abs) for op, of_abs in plan.reductions)
                )
        return BatchLayout(
            plans=tuple(plans),
            wanted=tuple(i for i, plan in enumerate(plans) if plan.anything),
            stored=tuple(i for i, plan in enumerate(plans) if plan.raw or plan.shape),
            summarised=tuple(
                i
                for i, plan in enumerate(plans)
                if plan.raw or plan.shape or (plan.anything and plan.summary is not None)
            ),
            reduced={ops: (tuple(indices), names) for ops, (indices, names) in reduced.items()},
        )
