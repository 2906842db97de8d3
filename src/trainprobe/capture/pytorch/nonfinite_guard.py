"""The non-finite guard: where a training's first NaN or infinity started, at O(1) cost a step.

**Detecting**, every step: the step's losses (or, in a step that computed none, the model's
outputs) and its gradients are checked together. On a GPU, one ``torch._foreach_norm`` per device
and dtype, stacked into one small vector: a NaN or an infinity anywhere makes a tensor's norm
non-finite, and the norm, the largest magnitude, cannot overflow. On the CPU, first the sum of
them all laid end to end (two operations, whatever their number); only when that is not finite
each tensor's l2 norm in float32 (the largest magnitude runs ten times slower there), and a tensor
found non-finite is checked element by element before it counts (a large finite sum or square
overflows). The pass is the update's summary's (``update_summary``), which the spike rules read
too: with GradientNormSpike armed it is one l2 norm a tensor, accumulated in float64 (it cannot
overflow), over the gradients that rule needs as well. A TRAIN step is checked
when its optimizer is about to step, other steps when they end. A clean step so dispatches a
handful of operations whatever the model's size, and nothing is hooked into its modules:

- on the CPU the vector is read at once (reading a CPU value costs no synchronisation), before
  the update, so the failing step is located and saved in full while it is still open;
- on a GPU the vector is copied to pinned host memory without blocking and read at the next
  check, a step late: a clean step never waits for the device. The origin is then known one
  step late, and the step after that is saved in full.

Gradients that need no check of their own: the other parameter gradients of a ``Linear``,
convolution or normalisation layer with a bias (Hugging Face's ``Conv1D`` too), and a tied
parameter's second use. Its bias gradient is the sum of its output's
gradient over all but the channel axis, so it is finite exactly when that gradient is; its
weight gradient is then finite short of an overflow inside its product or a non-finite input,
and either would break the weight at the update and show in the next forward, where the replay
names the parameter.

**Locating**, only once a step is found non-finite (``nonfinite_replay``): the step's forward is
run again with a check on every module's output, from what the guard kept of it (references to
the model's arguments, the random generators' and autocast's state). On a GPU, where the update
has run by the time the flags are read, the replay needs the parameters and buffers as they
were: the guard keeps a copy of them on the device, refreshed at every update (one fused copy),
when it takes at most ``SHADOW_SHARE`` of the device's free memory; for a larger model that copy
is off (a log line says so) and the origin is named from the flags alone (the loss, or the
gradient). When the forward was finite, the origin is the first non-finite gradient in backward
order (the modules' forward order, reversed).

The first origin found (``NonFiniteOrigin``: step, the first module or gradient, whether its
inputs were finite) goes to ``nonfinite/<worker>.json`` beside the tensors; it is written
again once the loss turns non-finite, after which the guard turns itself off.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch

from trainprobe.capture.pytorch import naming
from trainprobe.capture.pytorch.nonfinite_replay import (
    KeptForward,
    all_finite,
    keep_forward,
    replay,
    word_for,
)
from trainprobe.capture.pytorch.update_summary import UpdateSummary
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.nonfinite_file import NonFiniteOrigin

__all__ = ["SHADOW_SHARE", "NonFiniteGuard"]

log = logging.getLogger("trainprobe")

SHADOW_SHARE = 0.25
"""The largest share of a device's free memory the copy of the parameters may take (GPU)."""

_OUTPUT, _LOSS, _GRADIENT, _PARAMETER = "output", "loss", "gradient", "parameter"

# Layers whose bias gradient sums their output's gradient over every axis but the channel's.
_BIAS_SUMS_OUTPUT_GRADIENT = (
    torch.nn.Linear,
    torch.nn.Conv1d,
    torch.nn.Conv2d,
    torch.nn.Conv3d,
    torch.nn.ConvTranspose1d,
    torch.nn.ConvTranspose2d,
    torch.nn.ConvTranspose3d,
    torch.nn.modules.batchnorm._BatchNorm,
    torch.nn.LayerNorm,
    torch.nn.GroupNorm,
)
# The same layers of other libraries, by qualified class name (nothing of theirs is imported):
# Hugging Face's Conv1D is a linear layer whose weight is stored transposed (GPT-2's).
_BIAS_SUMS_OUTPUT_GRADIENT_NAMES = frozenset({"transformers.pytorch_utils.Conv1D"})


def _bias_sums_output_gradient(module: torch.nn.Module) -> bool:
    if isinstance(module, _BIAS_SUMS_OUTPUT_GRADIENT):
        return True
    kind = type(module)
    return f"{kind.__module__}.{kind.__qualname__}" in _BIAS_SUMS_OUTPUT_GRADIENT_NAMES


_Where = tuple[int, ModeKeys, int]
_NO_LOSS: Any = object()


@dataclass(frozen=True)
class _Checked:
    """One checked tensor: its kind, its module (or parameter) and the index of an output."""

    kind: str
    name: str
    index: int = 0

    @property
    def tensor_name(self) -> str:
        if self.kind == _GRADIENT:
            return naming.gradient_name(self.name)
        return f"{self.name}{naming.OUTPUT_SUFFIX}{self.index}"


@dataclass
class _Found:
    """Non-finite values found in a step: which, and what a replay of the step can use."""

    where: _Where
    values: list[tuple[_Checked, torch.Tensor | None]]  # the tensor itself where it is at hand
    kept: list[KeptForward]
    now: bool  # found while the step is open, before its update (CPU)
    shadowed: bool  # the parameters its forward used are kept (GPU)


@dataclass
class _Pending:
    """A step's flags on their way to the host (GPU), in an update's summary: ``checked`` names
    the summary's values in order (None: a value that is not the guard's)."""

    where: _Where
    checked: list[_Checked | None]
    summary: UpdateSummary
    kept: list[KeptForward]
    shadowed: bool


class _Shadow:
    """A copy of the models' parameters and buffers on their device, refreshed at each update:
    what the last updated step's forward ran with (GPU, where flags are read a step late)."""

    def __init__(self, live: list[torch.Tensor]) -> None:
        self._groups: dict[tuple[torch.device, torch.dtype], tuple[list[torch.Tensor], ...]] = {}
        for tensor in live:
            key = (tensor.device, tensor.dtype)
            lives, copies = self._groups.setdefault(key, ([], []))
            lives.append(tensor)
            copies.append(torch.empty_like(tensor))

    @staticmethod
    def fits(live: list[torch.Tensor]) -> bool:
        """Whether a copy of ``live`` fits in ``SHADOW_SHARE`` of its device's free memory."""
        size = sum(tensor.numel() * tensor.element_size() for tensor in live)
        device = live[0].device
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
        else:
            import psutil

            free = psutil.virtual_memory().available
        return size <= SHADOW_SHARE * free

    def refresh(self) -> None:
        with torch.no_grad():
            for lives, copies in self._groups.values():
                torch._foreach_copy_(copies, lives)

    def swap(self) -> None:
        """Exchange the live tensors' values with the copy's (twice: back as they were)."""
        with torch.no_grad():
            for lives, copies in self._groups.values():
                held = [tensor.clone() for tensor in lives]
                torch._foreach_copy_(lives, copies)
                torch._foreach_copy_(copies, held)


class NonFiniteGuard:
    """Finds the first non-finite module output, loss or gradient of a training.

    ``names`` and ``top_names`` name the registered modules and models by ``id``; ``models``
    gives the registered models. When a step is found non-finite while it is open (CPU),
    ``on_found(losses)`` is called first with the step's non-finite losses, then
    ``save(module, inputs, outputs)`` for the origin and every later module of the replayed
    forward."""

    def __init__(
        self,
        names: Mapping[int, str],
        top_names: Mapping[int, str],
        models: Callable[[], list[torch.nn.Module]],
        on_found: Callable[[list[tuple[str, torch.Tensor]]], None],
        save: Callable[[str, Any, Any], None],
    ) -> None:
        self.on = True
        self.origin: NonFiniteOrigin | None = None
        self.unwritten = False
        self.save_next_in_full = False
        self._names, self._top_names, self._models = names, top_names, models
        self._on_found, self._save = on_found, save
        self._where: _Where = (-1, ModeKeys.GLOBAL, -1)
        self._kept: list[KeptForward] = []
        self._losses: dict[int, tuple[str, torch.Tensor]] = {}
        self._outputs: list[Any] = []  # the models' outputs, taken apart only when checked
        self._gradients_checked = False
        self._checked_parameters: list[tuple[torch.Tensor, _Checked]] = []
        self._checked_ids: set[int] = set()
        self._parameters: dict[str, list[tuple[str, torch.Tensor]]] = {}
        self._module_of: dict[str, str] = {}
        self._pending: list[_Pending] = []
        self._shadow: _Shadow | None = None
        self._shadow_refused = False
        self._replayable = True
        self._order: list[str] = []  # the modules of the last replay, in forward order

    def register(
        self, name: str, module: torch.nn.Module, parameters: list[tuple[str, torch.Tensor]]
    ) -> None:
        """Note a registered module and its own ``parameters`` (saved name, tensor)."""
        if _shards_parameters(module):
            self._replayable = False  # a forward run on one rank alone would wait forever
        if parameters:
            self._parameters[name] = parameters
        bias = getattr(module, "bias", None)
        implied = set()
        if (
            _bias_sums_output_gradient(module)
            and isinstance(bias, torch.Tensor)
            and bias.requires_grad
        ):
            implied = {key for key, tensor in parameters if tensor is not bias}
        for key, tensor in parameters:
            self._module_of.setdefault(key, name)
            if key in implied or not tensor.requires_grad or id(tensor) in self._checked_ids:
                continue  # a tied parameter is checked once, where the forward first uses it
            self._checked_ids.add(id(tensor))
            self._checked_parameters.append((tensor, _Checked(_GRADIENT, key)))

    # ----- the step -----

    def begin(self, step: int, mode: ModeKeys, mode_step: int) -> None:
        """A new step starts."""
        self._where = (step, mode, mode_step)
        self._kept, self._losses, self._outputs = [], {}, []
        self._gradients_checked = False

    def keep_forward(
        self, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """A forward of the step starts: keep what a replay needs."""
        self._kept.append(keep_forward(model, args, kwargs))

    def add_loss(self, name: str, loss: torch.Tensor) -> None:
        """A loss of the step."""
        if loss.is_floating_point():
            self._losses[id(loss)] = (name, loss)

    def add_output(self, outputs: Any) -> None:
        """A model's outputs, checked when the step computes no loss."""
        if self.origin is None:
            self._outputs.append(outputs)

    def update_tensors(self) -> tuple[list[_Checked], list[torch.Tensor]]:
        """An optimizer is about to step: the losses so far and the gradients, to be checked
        in the update's summary (``check_update``)."""
        self._read_pending(block=True)  # before the copy of the parameters is refreshed
        if not self.on:
            return [], []
        return self._take_unchecked()

    def check_update(
        self, checked: list[_Checked], tensors: list[torch.Tensor], summary: UpdateSummary
    ) -> None:
        """Read the update's ``summary`` of the tensors ``update_tensors`` gave."""
        if checked:
            self._check(checked, tensors, summary, update=True)

    def finish(self) -> None:
        """The step ends: check what the step computed since the last check; read the flags
        of the step before (GPU)."""
        self._read_pending()
        if self.on:
            first_check = not self._gradients_checked  # no update checked this step
            checked, tensors = self._take_unchecked()
            if not tensors and first_check and self.origin is None:
                tensors = [
                    tensor
                    for outputs in self._outputs
                    for tensor in naming.module_tensors(outputs)
                    if tensor.is_floating_point()
                ]
                top = self._top_name()
                checked = [_Checked(_OUTPUT, top, i) for i in range(len(tensors))]
            if tensors:
                summary = UpdateSummary(tensors)
                self._check(checked, tensors, summary, update=False)
                summary.send()
        self._kept, self._outputs = [], []

    def close(self) -> None:
        """The training ends: read what is still pending."""
        self._read_pending(block=True, closing=True)

    def _take_unchecked(self) -> tuple[list[_Checked], list[torch.Tensor]]:
        """The losses computed since the last check, and the gradients if the step's were not
        checked yet (and no origin is known)."""
        losses, self._losses = list(self._losses.values()), {}
        checked = [_Checked(_LOSS, name) for name, _ in losses]
        tensors = [loss for _, loss in losses]
        if self.origin is not None or self._gradients_checked:
            return checked, tensors
        self._gradients_checked = True
        for parameter, gradient in self._checked_parameters:
            grad = parameter.grad
            if grad is not None and grad.is_floating_point():
                checked.append(gradient)
                tensors.append(grad)
        return checked, tensors

    def _top_name(self) -> str:
        if self._kept:
            model = self._kept[0].model
            return self._top_names.get(id(model), type(model).__name__)
        return next(iter(self._top_names.values()), "model")

    # ----- checking -----

    def _check(
        self,
        checked: list[_Checked],
        tensors: list[torch.Tensor],
        summary: UpdateSummary,
        update: bool,
    ) -> None:
        """Read the flags of ``tensors`` (named by ``checked``) in ``summary``: at once where the
        host reads them freely (a tensor found non-finite is then checked element by element:
        its norm may have overflowed), a step late elsewhere."""
        if summary.clean or summary.flags is None:
            return
        if summary.flags_now is not None:
            found: list[tuple[_Checked, torch.Tensor | None]] = [
                (checked[index], tensors[index])
                for index, value in zip(summary.flag_order, summary.flags_now, strict=True)
                if index is not None
                and not math.isfinite(value)
                and not all_finite([tensors[index]])
            ]
            if found:
                self._found(_Found(self._where, found, self._kept, now=True, shadowed=False))
            return
        shadowed = update and self._refresh_shadow()
        named = [None if index is None else checked[index] for index in summary.flag_order]
        self._pending.append(_Pending(self._where, named, summary, self._kept, shadowed))

    def _read_pending(self, block: bool = False, closing: bool = False) -> None:
        """Read the flags that have reached the host (``block``: wait for all of them)."""
        while self._pending:
            item = self._pending[0]
            if not block and not item.summary.ready():
                return
            self._pending.pop(0)
            values = item.summary.read()
            found: list[tuple[_Checked, torch.Tensor | None]] = [
                (checked, None)
                for checked, value in zip(item.checked, values, strict=False)
                if checked is not None and not math.isfinite(value)
            ]
            if found and self.on:
                had_origin = self.origin is not None
                self._found(_Found(item.where, found, item.kept, False, item.shadowed))
                if not had_origin and not closing:
                    self.save_next_in_full = True

    def _found(self, found: _Found) -> None:
        """Non-finite values were found in a step: locate the origin (once), note the loss."""
        if self.origin is None:
            if found.now:
                losses = [(item.name, t) for item, t in found.values if item.kind == _LOSS]
                self._on_found([(name, t) for name, t in losses if t is not None])
            self.origin = self._locate(found)
            self.unwritten = True
        loss = next((t for item, t in found.values if item.kind == _LOSS), _NO_LOSS)
        if loss is not _NO_LOSS and self.origin.loss_step is None:
            what = word_for(loss) if loss is not None else "NaN or infinity"
            self.origin = replace(self.origin, loss_step=found.where[0], loss_what=what)
            self.unwritten = True
            self.on = False  # found where it started and when the loss followed: done

    def _locate(self, found: _Found) -> NonFiniteOrigin:
        step, mode, mode_step = found.where
        located = self._replay(found.kept, found.now, found.shadowed)
        if located is not None:
            kind, module, tensor_name, what, inputs_finite = located
            return NonFiniteOrigin(
                step=step, mode=mode, mode_step=mode_step, kind=kind, module=module,
                tensor=tensor_name, what=what, inputs_finite=inputs_finite,
                saved_in_full=found.now,
            )  # fmt: skip
        first, tensor = self._first_in_backward(found.values, self._order)
        return NonFiniteOrigin(
            step=step, mode=mode, mode_step=mode_step, kind=first.kind, module=first.name,
            tensor=first.tensor_name,
            what=word_for(tensor) if tensor is not None else "NaN or infinity",
            saved_in_full=found.now,
        )  # fmt: skip

    def _replay(
        self, kept: list[KeptForward], now: bool, shadowed: bool
    ) -> tuple[str, str, str, str, bool | None] | None:
        """Replay the step's forward, at once (CPU) or with the copy of the parameters its
        forward used (GPU): the first non-finite module output (kind, module, tensor, what,
        whether its inputs were finite), or a parameter the update before it broke."""
        self._order = []
        if not kept or not (now or shadowed) or not self._replayable:
            return None
        shadow = None if now else self._shadow
        if shadow is not None:
            shadow.swap()
        try:
            replayed = replay(kept, self._names, self._top_names, self._save if now else None)
            self._order = replayed.order
            if replayed.module is None or replayed.tensor is None:
                return None
            module, inputs_finite = replayed.module, replayed.inputs_finite
            parameter = self._non_finite_parameter(module) if inputs_finite else None
            if parameter is not None:  # made so by the last update, before this forward
                name, tensor = parameter
                return _PARAMETER, name, name, word_for(tensor), None
            tensor_name = f"{module}{naming.OUTPUT_SUFFIX}{replayed.index}"
            return _OUTPUT, module, tensor_name, word_for(replayed.tensor), inputs_finite
        except Exception as error:  # a forward that cannot run twice: named from the flags
            log.warning(
                "trainprobe: the step could not be run again to locate its NaN (%s: %s)",
                type(error).__name__,
                error,
            )
            return None
        finally:
            if shadow is not None:
                shadow.swap()

    def _first_in_backward(
        self, found: list[tuple[_Checked, torch.Tensor | None]], order: list[str]
    ) -> tuple[_Checked, torch.Tensor | None]:
        """The non-finite gradient computed first (its module last in the forward's order; a
        bias before its weight), else the first non-finite output, else the loss."""
        gradients = [entry for entry in found if entry[0].kind == _GRADIENT]
        if not gradients:
            return next((entry for entry in found if entry[0].kind == _OUTPUT), found[0])
        position = {name: index for index, name in enumerate(order)}
        registered = {
            gradient.name: index for index, (_, gradient) in enumerate(self._checked_parameters)
        }

        def backward_rank(entry: tuple[_Checked, torch.Tensor | None]) -> tuple[int, int]:
            name = entry[0].name
            module = self._module_of.get(name, "")
            return (-position.get(module, -1), -registered.get(name, 0))

        return min(gradients, key=backward_rank)

    def _non_finite_parameter(self, module: str) -> tuple[str, torch.Tensor] | None:
        """The first of ``module``'s own parameters that is not finite, if any."""
        for name, tensor in self._parameters.get(module, []):
            if not all_finite([tensor]):
                return name, tensor
        return None

    def _refresh_shadow(self) -> bool:
        """Copy the parameters and buffers as this step's forward used them (GPU); False when
        the copy is off."""
        if self._shadow is None and not self._shadow_refused:
            live = [t for model in self._models() for t in [*model.parameters(), *model.buffers()]]
            if live and _Shadow.fits(live):
                self._shadow = _Shadow(live)
            else:
                self._shadow_refused = True
                log.warning(
                    "trainprobe: the model is too large to keep a copy of its parameters for "
                    "the non-finite guard (over %d%% of the device's free memory): a NaN's "
                    "origin will be named from the loss and the gradients only",
                    int(SHADOW_SHARE * 100),
                )
        if self._shadow is None:
            return False
        self._shadow.refresh()
        return True


def _shards_parameters(module: torch.nn.Module) -> bool:
    """Whether ``module`` gathers its parameters from other ranks in its forward (FSDP)."""
    return "FullyShardedDataParallel" in type(module).__name__ or hasattr(module, "_fsdp_state")
