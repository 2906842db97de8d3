"""Where a PyTorch hook is in its life: one state, not a handful of flags."""

from __future__ import annotations

from enum import Enum

__all__ = ["HookState"]


class HookState(Enum):
    """Where a hook is in its life."""

    WAITING = "waiting"
    """Between steps, or in a step that saves nothing."""
    SAVING = "saving"
    """In a step that saves tensors."""
    FAILED = "failed"
    """Saving failed: it stopped for the rest of the run (the training goes on)."""
    CLOSED = "closed"
    """Closed: its last step and files are written."""

    @property
    def listening(self) -> bool:
        """Whether the hook takes the training's events in this state."""
        return self not in (HookState.FAILED, HookState.CLOSED)

    def step_begun(self, saving: bool) -> HookState:
        """The state once a step (``saving`` or not) has begun."""
        if self in (HookState.FAILED, HookState.CLOSED):
            return self
        return HookState.SAVING if saving else HookState.WAITING
