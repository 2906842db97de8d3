"""The registered models' modules, parameters and activation functions, by the names their tensors
are saved under, and the hooks a saved step puts on them.

A module is hooked only for the steps that save its inputs or outputs (a hooked module slows every
call of it), judged by the names of its first input and output: a step that saves only
parameters, gradients and losses hooks none of the model's modules. Gradients are read from
``.grad`` together when the backward pass ends (smdebug's way), or at the update (following the
training). Activation functions called inside a model's forward (``torch.nn.functional``'s) are
watched in the steps that save them (``functional_activations``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

import torch

from trainprobe.capture.collections import CollectionSet
from trainprobe.capture.pytorch import naming
from trainprobe.capture.pytorch.functional_activations import (
    FUNCTION_TYPES,
    FunctionalActivations,
)
from trainprobe.capture.pytorch.module_hooks import ModuleHookHandle, attach_forward_hook
from trainprobe.capture.pytorch.module_types import ModuleTypes
from trainprobe.capture.pytorch.step_capture import StepCapture
from trainprobe.capture.pytorch.training_follower import StepListener, StepStart
from trainprobe.capture.pytorch.training_losses import LossSource
from trainprobe.capture.pytorch.training_steps import when_backward_ends
from trainprobe.capture.save_plan import SavePlan

__all__ = ["SAVE_EVERYTHING", "ModuleSaving", "SavingHook"]

SAVE_EVERYTHING = -1
"""The due collections of a step saved in full (after a non-finite value): every bit set."""

Parameters = list[tuple[str, torch.nn.Parameter]]


class SavingHook(Protocol):
    """What the module hooks call back: the hook's entry points (timed, failures contained)."""

    @property
    def _active(self) -> bool:
        """Whether the step in progress saves tensors."""

    def _on_module_io(self, name: str, inputs: Any, outputs: Any) -> None:
        """A hooked module's forward returned."""

    def _on_function(self, kind: str, inputs: Any, outputs: Any) -> None:
        """An activation function was called in a saved step's forward."""

    def _save_named(self, name: str, suffix: str, value: Any) -> None:
        """Save ``value``'s tensors as ``<name><suffix><i>``."""


class ModuleSaving(StepListener):
    """The modules of the models a hook registered, and their hooks in saved steps (see the
    module docstring). ``plan`` says what a step saves, ``capture`` saves it; ``hook`` is called
    back; ``replaying`` says whether the non-finite guard runs a forward again (the hooks stand
    aside); ``gradients_due`` whether a backward's end is when a step's gradients are saved (a
    TRAIN step of a training that updates without ``torch.optim``)."""

    def __init__(
        self,
        plan: SavePlan,
        capture: StepCapture,
        hook: SavingHook,
        module_types: ModuleTypes,
        replaying: Callable[[], bool],
        gradients_due: Callable[[], bool],
    ) -> None:
        self.plan = plan
        self.capture = capture
        self.module_types = module_types
        self.replaying = replaying
        self.gradients_saved = False
        """Whether the TRAIN step in progress has saved its gradients (by hand, at a backward's
        end)."""
        self._gradients_due = gradients_due
        self.names: dict[int, str] = {}
        """Each registered module's name, by ``id``."""
        self.top_names: dict[int, str] = {}
        """Each registered model's name (its class's), by ``id``."""
        self.registered: dict[int, Parameters] = {}
        """Each registered model's parameters with their saved names, by the model's ``id``."""
        self.parameters: Parameters = []
        """The parameters whose gradients are saved (those that require one)."""
        self.losses: set[str] = set()
        """The names of the loss modules."""
        self.functional = FunctionalActivations(hook._on_function)
        self.functional_owner: str | None = None
        """The model whose activation functions are watched now ("": never, compiled)."""
        self._hook = hook
        self._modules: list[tuple[torch.nn.Module, str]] = []
        self._handles: list[ModuleHookHandle | Any] = []
        # The due collections the modules are hooked for (0: none; None: for an older plan).
        self._hooked_for: int | None = 0
        self._functions_saved = False
        self._backward_gradients: Parameters = []
        self._resolved: set[tuple[int, int]] = set()
        self._names_resolved = -1

    def add_module(self, submodule: torch.nn.Module, name: str, *, hooked: bool) -> None:
        """Name a module of a registered model (``hooked``: saved by its hook in saved steps)."""
        self.names[id(submodule)] = name
        if hooked:
            self._modules.append((submodule, name))

    def add_parameters(self, model: torch.nn.Module, parameters: Parameters) -> None:
        """A registered model's parameters, with their saved names."""
        self.registered[id(model)] = parameters
        self.parameters.extend(p for p in parameters if p[1].requires_grad)
        self.unhook()  # hooked again, this model too, at the next saved step

    # ----- a saved step's hooks -----

    def hook_for(self, due: int, *, gradients: bool) -> None:
        """Hook, for a step saving the collections in ``due`` (SAVE_EVERYTHING: the step is
        saved in full), the modules whose inputs or outputs they hold and (``gradients``) the
        gradients they hold; watch activation functions if they hold those."""
        if due == self._hooked_for:
            return
        self.unhook()
        self._hooked_for = due
        everything = due == SAVE_EVERYTHING

        def holds(*names: str) -> bool:
            return everything or self.plan.holds_any(names, due)

        for module, name in self._modules:
            if holds(f"{name}{naming.INPUT_SUFFIX}0", f"{name}{naming.OUTPUT_SUFFIX}0"):
                self._handles.append(attach_forward_hook(module, self.module_hook(name)))
        if gradients:
            for name, parameter in self.parameters:
                if holds(naming.gradient_name(name)):
                    hook = self._gradient_hook(name, parameter)
                    self._handles.append(parameter.register_hook(hook))  # type: ignore[no-untyped-call]
        self._functions_saved = holds(
            *(
                f"{top}.{kind}{suffix}0"
                for top in self.top_names.values()
                for kind in FUNCTION_TYPES
                for suffix in (naming.INPUT_SUFFIX, naming.OUTPUT_SUFFIX)
            )
        )

    def unhook(self) -> None:
        """Take a saved step's hooks off."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._hooked_for = 0
        self._functions_saved = False

    def plan_changed(self) -> None:
        """The save plan changed: hook again for it at the next saved step."""
        if self._hooked_for:
            self._hooked_for = None

    def watch_functions(self, model_id: int) -> None:
        """A saved step of model ``model_id`` starts: watch its activation functions, if the
        step saves them."""
        if self.functional_owner != "" and self._functions_saved:
            self.functional_owner = self.top_names.get(model_id)
            self.functional.start()

    def module_hook(self, name: str, always: bool = False) -> Callable[..., None]:
        """The forward hook of a module saved at this step (``always``: a loss module, heard
        at every step)."""
        hook = self._hook
        capture = _eager(functools.partial(hook._on_module_io, name))

        def module_hook(module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
            if self.replaying():
                return
            if hook._active:
                capture(inputs, outputs)
            # Out of compiled regions: it would break the graph every step.
            elif always and not torch.compiler.is_compiling():
                hook._on_module_io(name, inputs, outputs)  # eager: no graph-break wrapper

        return module_hook

    def _gradient_hook(
        self, name: str, parameter: torch.nn.Parameter
    ) -> Callable[[torch.Tensor], None]:
        """A parameter's gradient hook in a saved step: the gradients the backward computed are
        saved together from ``.grad`` when it ends (their reductions batched; holding the
        tensor the hook sees would make autograd copy it into ``.grad``)."""

        def gradient_hook(grad: torch.Tensor) -> None:
            if not self._hook._active:
                return
            if not self._backward_gradients:
                when_backward_ends(self._backward_ended)
            self._backward_gradients.append((name, parameter))

        return gradient_hook

    def _backward_ended(self) -> None:
        computed, self._backward_gradients = self._backward_gradients, []
        if self._hook._active:
            self.save_gradients(computed)

    # ----- saving -----

    def save_io(self, name: str, inputs: Any, outputs: Any) -> None:
        """Save a module's (or an activation function's) inputs and outputs: in a saved step,
        and for a non-finite step's replay from its origin on."""
        self.capture.capture_named(name, naming.INPUT_SUFFIX, inputs)
        self.capture.capture_named(name, naming.OUTPUT_SUFFIX, outputs)

    def save_gradients(self, parameters: Parameters) -> None:
        """Save the ``.grad`` of each (saved name, parameter) that has one, together."""
        self.capture.capture(
            [(naming.gradient_name(name), p.grad) for name, p in parameters if p.grad is not None]
        )

    def save_in_full(self, *, gradients: bool) -> None:
        """The step has gone non-finite: hook every module (and, ``gradients``, every
        gradient) for the rest of it, and save every parameter now."""
        self.capture.save_in_full()
        self.hook_for(SAVE_EVERYTHING, gradients=gradients)
        for parameters in self.registered.values():
            self.capture.capture(parameters)

    # ----- the step's events (StepListener) -----

    def step_started(self, start: StepStart) -> None:
        """A step starts: its gradients are not saved yet."""
        self.gradients_saved = False

    def forward_ended(self, model: torch.nn.Module, outputs: Any) -> None:
        """A model's forward returned: no more activation functions of it are watched."""
        self.functional.stop()

    def loss_heard(
        self, source: LossSource, name: str, loss: torch.Tensor, module: torch.nn.Module | None
    ) -> None:
        """A loss module heard following the training: its type is recorded."""
        if module is not None and name not in self.losses:
            self.losses.add(name)
            self.module_types.add(name, module)

    def backward_ended(self) -> None:
        """A backward pass of the training ended. A training that updates its parameters
        without ``torch.optim`` (by hand, another library's optimizer, or not at all) has its
        TRAIN step's gradients now: they are saved before its update or ``zero_grad()``."""
        if self._hook._active and not self.gradients_saved and self._gradients_due():
            self.gradients_saved = True
            self.save_gradients(self.parameters)

    # ----- names and collections -----

    def prepare_if_changed(
        self, collections: CollectionSet, module_types: ModuleTypes, *, strict: bool
    ) -> None:
        """Include the modules' tensors in the collections that name modules (or module
        types), and prepare the plan again, when collections or modules changed since."""
        if collections.revision == self.plan.revision and len(self.names) == self._names_resolved:
            return
        self._resolve_module_collections(collections)
        module_types.attach(collections)
        self._names_resolved = len(self.names)
        if self.plan.is_stale():
            self.plan.prepare(strict=strict)
        self.plan_changed()

    def _resolve_module_collections(self, collections: CollectionSet) -> None:
        for collection in collections:
            for module, (inputs, outputs) in list(collection.modules.items()):
                key = (id(collection), id(module))
                name = self.names.get(id(module))
                if name is None or key in self._resolved:
                    continue
                self._resolved.add(key)
                if inputs:
                    collection.include(name + naming.INPUT_SUFFIX)
                if outputs:
                    collection.include(name + naming.OUTPUT_SUFFIX)


def _eager(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` run as plain Python even inside a compiled region (a graph break)."""
    return torch.compiler.disable(function)  # type: ignore[no-untyped-call,no-any-return]
