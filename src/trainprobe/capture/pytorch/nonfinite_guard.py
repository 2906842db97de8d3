"""The non-finite guard: every step, finds where a training's first NaN or infinity started.

On every step (not only save steps) the hook hands the guard each registered module's outputs
(in forward order), each loss, and each gradient (in backward order). The guard takes one
device-side sum of each (a NaN or an infinity makes the sum non-finite; so would a sum of
finite values beyond float32's range, about 3e38) and tests it:

- on the CPU at once: reading a CPU number costs no synchronisation, so the step in which
  the first non-finite tensor appears is known while it runs, and the hook saves the rest of
  it in full (that module's inputs and outputs, the later modules, the loss, the gradients,
  the parameters);
- on a GPU, the sums of a step are stacked into one device tensor at the end of the step and
  copied to pinned host memory without blocking; the copy is read at the end of the next step,
  when it has long finished, so a clean step costs no synchronisation. The origin is then
  known one step late, and the step after that is saved in full.

Some tensors need no sum of their own, which keeps a clean step's cost down to one read of
each module output and of a few gradients:

- an output that is the tensor checked last (an ``nn.Sequential`` returns its last member's
  output), and the output of an element-wise module that keeps finite values finite
  (``nn.ReLU``, ``nn.Tanh``, ``nn.GELU``, ...) when its input is the tensor covered last: if that
  input was non-finite, its own check found it first;
- the other parameter gradients of a ``Linear``, convolution or normalisation layer with a
  bias. Its bias gradient is the sum of its output's gradient over all but the channel axis,
  so it is finite exactly when that gradient is (an infinity or a NaN never sums back to a
  finite number); with its inputs finite too (checked in the forward), its weight gradient is
  finite short of an overflow inside its product. Such an overflow, or an optimizer that makes
  a parameter non-finite, shows at the next forward, where the layer's output goes non-finite
  with finite inputs and the guard names the parameter (on a GPU, where the flags are read a
  step late, it names the layer's output). A parameter used outside its layer as well
  (weights tied into a functional call) is covered the same way.

The first origin found (``NonFiniteOrigin``: step, the first module or gradient, whether its
inputs were finite) goes to ``nonfinite/<worker>.json`` beside the tensors; it is written
again once the loss turns non-finite, after which the guard turns itself off.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import torch

from trainprobe.capture.overhead import wait_for_device
from trainprobe.capture.pytorch import naming
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.nonfinite_file import NonFiniteOrigin

__all__ = ["NonFiniteGuard"]

_OUTPUT, _LOSS, _GRADIENT, _PARAMETER = "output", "loss", "gradient", "parameter"

# Element-wise, without parameters, finite wherever their input is finite.
_KEEP_FINITE = (
    torch.nn.ReLU,
    torch.nn.ReLU6,
    torch.nn.LeakyReLU,
    torch.nn.ELU,
    torch.nn.GELU,
    torch.nn.SiLU,
    torch.nn.Tanh,
    torch.nn.Sigmoid,
    torch.nn.Hardtanh,
    torch.nn.Softsign,
    torch.nn.Softmax,
    torch.nn.Identity,
    torch.nn.Flatten,
)

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


@dataclass(frozen=True)
class _Checked:
    """One tensor checked on a GPU: its kind, module (or parameter) and tensor name."""

    kind: str
    module: str
    tensor: str


_HALF = frozenset({torch.float16, torch.bfloat16})


def _checked_sum(tensor: torch.Tensor) -> torch.Tensor | None:
    """The sum of a floating-point tensor (float32 or wider), None for tensors not checked."""
    if not tensor.is_floating_point():
        return None
    tensor = tensor.detach()
    if tensor.dtype in _HALF:
        return tensor.sum(dtype=torch.float32)
    return tensor.sum()


def _tensor_name(kind: str, module: str, index: int) -> str:
    """The saved name of a checked tensor: an output, a loss, a gradient or a parameter."""
    if kind == _GRADIENT:
        return naming.gradient_name(module)
    if kind == _PARAMETER:
        return module
    return f"{module}{naming.OUTPUT_SUFFIX}{index}"


def _word(tensor: torch.Tensor) -> str:
    """ "NaN" when ``tensor`` holds one, else "infinity" (a sum cannot tell: inf - inf is NaN)."""
    return "NaN" if bool(torch.isnan(tensor.detach()).any()) else "infinity"


class NonFiniteGuard:
    """Finds the first non-finite module output, loss or gradient of a training."""

    def __init__(self) -> None:
        self.on = True
        self.origin: NonFiniteOrigin | None = None
        self.unwritten = False
        self.save_next_in_full = False
        self._step, self._mode, self._mode_step = -1, ModeKeys.GLOBAL, -1
        self._sums: list[torch.Tensor] = []
        self._checked: list[_Checked] = []
        self._pending: tuple[int, ModeKeys, int, list[_Checked], torch.Tensor, object] | None = None
        self._loss_bad_now: str | None = None
        self._keep_finite: set[str] = set()
        self._covered: torch.Tensor | None = None  # the tensor checked (or implied) last
        self._parameters: dict[str, list[tuple[str, torch.Tensor]]] = {}
        self._implied: set[str] = set()  # parameters whose gradient a bias gradient implies

    def register(
        self, name: str, module: torch.nn.Module, parameters: list[tuple[str, torch.Tensor]]
    ) -> None:
        """Note a registered module and its own ``parameters`` (saved name, tensor). An
        element-wise one that keeps finite values finite is checked through its input."""
        if isinstance(module, _KEEP_FINITE):
            self._keep_finite.add(name)
        if parameters:
            self._parameters[name] = parameters
        bias = getattr(module, "bias", None)
        if (
            isinstance(module, _BIAS_SUMS_OUTPUT_GRADIENT)
            and isinstance(bias, torch.Tensor)
            and bias.requires_grad
        ):
            self._implied.update(key for key, tensor in parameters if tensor is not bias)

    # ----- the step -----

    def begin(self, step: int, mode: ModeKeys, mode_step: int) -> None:
        """A new step starts."""
        self._step, self._mode, self._mode_step = step, mode, mode_step
        self._loss_bad_now = None
        self._covered = None

    def output(self, module: str, inputs: object, outputs: object, is_loss: bool) -> bool:
        """Check a module's outputs; True when this is the step's (and run's) first non-finite
        tensor, found now (CPU), so the hook saves the rest of the step in full."""
        if self.origin is not None and not is_loss:
            return False
        if isinstance(outputs, torch.Tensor):
            produced = [outputs]
        else:
            produced = list(naming.module_tensors(outputs))
        keeps_finite = not is_loss and len(produced) == 1 and module in self._keep_finite
        if keeps_finite and self._covers(inputs):
            self._covered = produced[0]  # finite exactly when its input is
            return False
        kind = _LOSS if is_loss else _OUTPUT
        for index, tensor in enumerate(produced):
            if tensor is self._covered and not is_loss:
                continue  # checked already: a container returning its last member's output
            if self._check(kind, module, index, tensor, inputs):
                return True
            self._covered = tensor
        return False

    def _covers(self, inputs: object) -> bool:
        """Whether ``inputs`` (a forward's arguments) is just the tensor covered last."""
        covered = self._covered
        return (
            covered is not None
            and isinstance(inputs, tuple)
            and len(inputs) == 1
            and inputs[0] is covered
        )

    def implies(self, parameter: str) -> bool:
        """Whether ``parameter``'s gradient needs no check: its layer's bias gradient implies
        it is finite."""
        return parameter in self._implied

    def gradient(self, parameter: str, grad: torch.Tensor) -> bool:
        """Check a gradient; True when it is the run's first non-finite tensor (CPU)."""
        if self.origin is not None or self.implies(parameter):
            return False
        return self._check(_GRADIENT, parameter, 0, grad, None)

    def _check(
        self, kind: str, module: str, index: int, tensor: torch.Tensor, inputs: object
    ) -> bool:
        total = _checked_sum(tensor)
        if total is None:
            return False
        if not total.is_cpu:
            self._sums.append(total)
            self._checked.append(_Checked(kind, module, _tensor_name(kind, module, index)))
            return False
        if math.isfinite(total.item()):
            return False
        if kind == _LOSS and self._loss_bad_now is None:
            self._loss_bad_now = _word(tensor)
        if self.origin is not None:
            return False
        inputs_finite = _all_finite(naming.module_tensors(inputs)) if kind == _OUTPUT else None
        parameter = self._non_finite_parameter(module) if inputs_finite else None
        if parameter is not None:  # made so by the last update, before this forward
            kind, (module, tensor), inputs_finite = _PARAMETER, parameter, None
        self.origin = NonFiniteOrigin(
            step=self._step,
            mode=self._mode,
            mode_step=self._mode_step,
            kind=kind,
            module=module,
            tensor=_tensor_name(kind, module, index),
            what=_word(tensor),
            inputs_finite=inputs_finite,
            saved_in_full=True,
        )
        self.unwritten = True
        return True

    def _non_finite_parameter(self, module: str) -> tuple[str, torch.Tensor] | None:
        """The first of ``module``'s own parameters that is not finite, if any."""
        for name, tensor in self._parameters.get(module, []):
            if not _all_finite([tensor]):
                return name, tensor
        return None

    def finish(self) -> None:
        """The step ends: read the previous GPU step's flags, queue this one's, note the loss."""
        self._covered = None
        self._read_pending()
        if self._sums:
            self._queue_sums()
        if self._loss_bad_now is not None and self.origin is not None:
            if self.origin.loss_step is None:
                self.origin = replace(
                    self.origin, loss_step=self._step, loss_what=self._loss_bad_now
                )
                self.unwritten = True
            self.on = False  # found where it started and when the loss followed: done

    def close(self) -> None:
        """The training ends: read what is still pending."""
        self._read_pending(wait=True)

    # ----- GPU steps -----

    def _queue_sums(self) -> None:
        device = self._sums[0].device
        flags = torch.isfinite(torch.stack([total.to(device) for total in self._sums]))
        host = torch.empty(flags.shape, dtype=torch.bool, pin_memory=True)
        host.copy_(flags, non_blocking=True)
        event = torch.cuda.Event()  # type: ignore[no-untyped-call]
        event.record(torch.cuda.current_stream(device))
        self._pending = (self._step, self._mode, self._mode_step, self._checked, host, event)
        self._sums, self._checked = [], []

    def _read_pending(self, wait: bool = False) -> None:
        if self._pending is None:
            return
        step, mode, mode_step, checked, host, event = self._pending
        self._pending = None
        assert isinstance(event, torch.cuda.Event)
        # Recorded a step ago, yet the training's queue can still hold that step's work: the
        # wait is counted apart from the hook's own time.
        wait_for_device(event)
        bad = [item for item, fine in zip(checked, host.tolist(), strict=True) if not fine]
        if not bad:
            return
        losses = [item for item in bad if item.kind == _LOSS]
        if self.origin is None:
            first = next((item for item in bad if item.kind != _LOSS), bad[0])
            self.origin = NonFiniteOrigin(
                step=step,
                mode=mode,
                mode_step=mode_step,
                kind=first.kind,
                module=first.module,
                tensor=first.tensor,
                what="NaN or infinity",
            )
            self.unwritten = True
            self.save_next_in_full = not wait
        if losses and self.origin.loss_step is None:
            self.origin = replace(self.origin, loss_step=step, loss_what="NaN or infinity")
            self.unwritten = True
            self.on = False


def _all_finite(tensors: Iterable[torch.Tensor]) -> bool:
    for tensor in tensors:
        total = _checked_sum(tensor)
        if total is not None and not math.isfinite(float(total)):
            return False
    return True
