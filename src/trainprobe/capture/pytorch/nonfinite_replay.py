"""Locating the first NaN or infinity of a step by running its forward again, module by module.

The guard only detects cheaply (see ``nonfinite_guard``); once a step is found non-finite, its
forward is replayed from what was kept when it ran (``KeptForward``): the model's arguments (the
tensors themselves, not copies), the random number generators' states and the autocast state.
The replay runs without gradients, with a check on every module's output: the first module (in
the order modules finish their forward) whose output is not finite is the origin, and whether
its inputs were finite tells a module that made the NaN from one that passed it on.

A replay reproduces the step when the forward depends only on the parameters, the buffers, the
inputs and the random generators, as a model's forward does. Buffers a forward updates (a batch
norm's running statistics) are put back as they were before the replay.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from trainprobe.capture.pytorch import naming

__all__ = ["KeptForward", "Replayed", "all_finite", "keep_forward", "replay", "word_for"]


@dataclass
class KeptForward:
    """One forward of a step, as it ran: enough to run it again."""

    model: torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    cpu_rng: torch.Generator  # the default generator as it was, in a generator of its own
    cuda_rng: list[torch.Tensor] | None
    autocast: list[tuple[str, bool, torch.dtype]]


def keep_forward(
    model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> KeptForward:
    """What a forward of ``model`` starts from (no copy of a tensor: references and host state)."""
    autocast = []
    if torch.is_autocast_enabled("cpu"):
        autocast.append(("cpu", True, torch.get_autocast_dtype("cpu")))
    cuda_rng = None
    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        cuda_rng = torch.cuda.get_rng_state_all()
        if torch.is_autocast_enabled("cuda"):
            autocast.append(("cuda", True, torch.get_autocast_dtype("cuda")))
    return KeptForward(model, args, kwargs, _copy_of_cpu_generator(), cuda_rng, autocast)


def _copy_of_cpu_generator() -> torch.Generator:
    """The default CPU generator as it is now (its cloned state costs less than a tensor of
    it: the guard keeps one every forward)."""
    generator = torch.default_generator
    if hasattr(generator, "clone_state"):  # PyTorch 2.4 on: no tensor of its state made
        return generator.clone_state()
    copy = torch.Generator()
    copy.set_state(generator.get_state())
    return copy


@dataclass
class Replayed:
    """What a replay found: the first non-finite module output, and the modules' order."""

    module: str | None = None
    index: int = 0
    tensor: torch.Tensor | None = None
    inputs_finite: bool | None = None
    order: list[str] = field(default_factory=list)  # modules in the order they finished


def all_finite(tensors: Iterator[torch.Tensor] | list[torch.Tensor]) -> bool:
    """Whether every floating-point tensor of ``tensors`` holds only finite values."""
    for tensor in tensors:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor.detach()).all()):
            return False
    return True


def word_for(tensor: torch.Tensor) -> str:
    """ "NaN" when ``tensor`` holds one, else "infinity"."""
    return "NaN" if bool(torch.isnan(tensor.detach()).any()) else "infinity"


def replay(
    kept: list[KeptForward],
    names: Mapping[int, str],
    top_names: Mapping[int, str],
    save: Callable[[str, Any, Any], None] | None = None,
) -> Replayed:
    """Run the kept forwards again with a check on every module's output.

    ``names`` names the modules (by ``id``), ``top_names`` the models. From the first
    non-finite output on, ``save(module, inputs, outputs)`` is called for that module and every
    later one (to save the rest of the step in full)."""
    found = Replayed()
    seen: set[str] = set()

    def check(module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        name = names.get(id(module))
        if name is None:
            return
        if name not in seen:
            seen.add(name)
            found.order.append(name)
        if found.module is None:
            produced = list(naming.module_tensors(outputs))
            for index, tensor in enumerate(produced):
                if tensor.is_floating_point() and not all_finite([tensor]):
                    found.module, found.index, found.tensor = name, index, tensor.detach()
                    found.inputs_finite = all_finite(list(naming.module_tensors(inputs)))
                    break
        if found.module is not None and save is not None:
            save(name, inputs, outputs)

    for forward in kept:
        model = forward.model
        handles = [
            module.register_forward_hook(check) for module in model.modules() if module is not model
        ]
        buffers = [buffer.detach().clone() for buffer in model.buffers()]
        try:
            with _as_it_ran(forward), torch.no_grad():
                outputs = model.forward(*forward.args, **forward.kwargs)
            check_top = names.get(id(model)) or top_names.get(id(model))
            if found.module is None and check_top is not None:
                produced = list(naming.module_tensors(outputs))
                for index, tensor in enumerate(produced):
                    if tensor.is_floating_point() and not all_finite([tensor]):
                        found.module, found.index = check_top, index
                        found.tensor = tensor.detach()
                        found.inputs_finite = all_finite(
                            list(naming.module_tensors((forward.args, forward.kwargs)))
                        )
                        break
        finally:
            for handle in handles:
                handle.remove()
            with torch.no_grad():
                for buffer, before in zip(model.buffers(), buffers, strict=False):
                    buffer.copy_(before)
        if found.module is not None and save is None:
            break
    return found


@contextlib.contextmanager
def _as_it_ran(forward: KeptForward) -> Iterator[None]:
    """The random generators and autocast as they were when ``forward`` started."""
    devices = list(range(len(forward.cuda_rng))) if forward.cuda_rng is not None else []
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.random.fork_rng(devices=devices))
        torch.set_rng_state(forward.cpu_rng.get_state())
        if forward.cuda_rng is not None:
            torch.cuda.set_rng_state_all(forward.cuda_rng)
        for device, enabled, dtype in forward.autocast:
            stack.enter_context(torch.autocast(device, dtype=dtype, enabled=enabled))
        yield
