"""The parts of smdebug's PyTorch hook that scripts reach past its documented API for.

AWS's examples subclass ``smd.Hook`` and override ``forward_hook`` to save more per module
(the pruning notebook saves each module's output under its own name and registers a gradient
hook on it), calling smdebug's ``module_maps``, ``_write_inputs``, ``_write_outputs``,
``backward_hook`` and ``last_saved_step``; profiling notebooks call ``record_trace_events``.
The ``Hook`` gets them from here, with smdebug's signatures:

- ``forward_hook(module, inputs, outputs)`` runs after each registered submodule's forward;
  when a subclass overrides it, ``register_module`` registers the override in its place;
- ``module_maps`` maps each registered module to its name (older smdebug), and each module's
  ``_module_name`` is that name (smdebug 1.0.34);
- ``_write_inputs(name, inputs)`` / ``_write_outputs(name, outputs)`` save
  ``<name>_input_<i>`` / ``<name>_output_<i>`` when the step saves;
- ``backward_hook(tname)`` returns a tensor hook saving its gradient as ``gradient/<tname>``;
- ``record_trace_events(timestamp, training_phase, op_name, phase, duration, **kwargs)`` adds
  an event to the framework timeline (nothing when framework profiling is off);
- ``_get_worker_name()`` is the process's worker name and ``_cleanup()`` closes the hook, as
  smdebug's own distributed tests call them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from trainprobe.capture.pytorch import naming
from trainprobe.capture.pytorch.profiling import FrameworkProfiler

__all__ = ["SmdebugSurface"]


class SmdebugSurface:
    """smdebug's overridable and semi-internal hook methods, over trainprobe's capture."""

    profiler: FrameworkProfiler | None

    def __init__(self) -> None:
        self.module_maps: dict[torch.nn.Module, str] = {}
        self.last_saved_step: int | None = None

    @property
    def step(self) -> int:
        raise NotImplementedError

    @property
    def _active(self) -> bool:
        raise NotImplementedError

    def _on_module_io(self, name: str, inputs: Any, outputs: Any) -> None:
        raise NotImplementedError

    def _save_named(self, name: str, suffix: str, value: Any) -> None:
        raise NotImplementedError

    def _on_gradient(self, name: str, grad: torch.Tensor) -> None:
        raise NotImplementedError

    def _worker_name(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _get_worker_name(self) -> str:
        """This process's worker name (``worker_<rank>``)."""
        return self._worker_name()

    def _cleanup(self) -> None:
        """Close the hook: its last step, collections file and end marker are written."""
        self.close()

    def _overrides_forward_hook(self) -> bool:
        return type(self).forward_hook is not SmdebugSurface.forward_hook

    def forward_hook(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        """Save ``module``'s inputs and outputs when the step saves (smdebug's per-module hook)."""
        if self._active:
            self._on_module_io(self.module_maps[module], inputs, outputs)
            self.last_saved_step = self.step

    def _write_inputs(self, name: str, inputs: Any) -> None:
        if self._active:
            self._save_named(name, naming.INPUT_SUFFIX, inputs)

    def _write_outputs(self, name: str, outputs: Any) -> None:
        if self._active:
            self._save_named(name, naming.OUTPUT_SUFFIX, outputs)

    def backward_hook(self, tname: str) -> Callable[[torch.Tensor], None]:
        """A tensor hook that saves the gradient it is given as ``gradient/<tname>``."""
        name = naming.gradient_name(tname)

        def back(grad: torch.Tensor) -> None:
            if self._active:
                self._on_gradient(name, grad)

        return back

    def record_trace_events(
        self,
        timestamp: float,
        training_phase: str = "",
        op_name: str = "",
        phase: str = "X",
        duration: float = 1,
        **kwargs: Any,
    ) -> None:
        """Add an event (start ``timestamp`` and ``duration`` in seconds) to the timeline."""
        if self.profiler is not None:
            self.profiler.record_event(training_phase, op_name, timestamp, duration, **kwargs)
