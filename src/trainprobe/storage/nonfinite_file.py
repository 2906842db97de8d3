"""Where a training's first NaN or infinity started, one file per worker, beside the tensors.

::

    <out_dir>/nonfinite/<worker>.json
    {"version": 1, "worker": "worker_0", "step": 7, "mode": "TRAIN", "mode_step": 7,
     "kind": "output", "module": "body.2", "tensor": "body.2_output_0", "what": "NaN",
     "inputs_finite": true, "loss_step": 7, "loss_what": "NaN", "saved_in_full": true}

``kind`` is "output" (the first module, in forward order, whose output was not finite), "loss"
(a loss went non-finite while every module output was finite), "parameter" (a module's output
was not finite because one of its parameters was not, before the step's forward: the previous
update made it so; ``module`` is then the parameter) or "gradient" (the first gradient, in
backward order, when the forward was finite; ``module`` is then the parameter).
``inputs_finite`` is whether that module's inputs were finite (None when not checked);
``loss_step`` the first step whose loss was not finite (None while it is finite); ``what`` and
``loss_what`` say "NaN" or "infinity";
``saved_in_full`` whether that step's tensors were saved raw. ``outputs_checked`` is false where
the hook checks the loss and the gradients only, not each layer's output (Keras's compiled steps):
a "loss" origin then says nothing of the layers' outputs. ``replayed`` (absent: true) is whether
the step's forward was run again to find the first module (a sharded model's is not: a "loss"
then says only that the forward broke). smdebug ignores this directory.

In a training of several processes each worker records its own first origin; the training's is
the earliest, and at the same step the one closest to the cause (an output, a parameter, a loss,
before a gradient: a NaN of one rank reaches the others' gradients through their reduction),
named with its worker.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace

from trainprobe.storage import files
from trainprobe.storage.modes import ModeKeys, step_in_words

__all__ = ["NONFINITE_DIR", "NonFiniteOrigin", "read_nonfinite_origin", "write_nonfinite_origin"]

log = logging.getLogger(__name__)

NONFINITE_DIR = "nonfinite"
_VERSION = 1
_SUFFIX = ".json"


@dataclass(frozen=True)
class NonFiniteOrigin:
    """The first step where a module output, a loss or a gradient was NaN or infinite."""

    step: int
    mode: ModeKeys
    mode_step: int
    kind: str
    module: str
    tensor: str
    what: str = "NaN"
    inputs_finite: bool | None = None
    loss_step: int | None = None
    loss_what: str = "NaN"
    saved_in_full: bool = False
    outputs_checked: bool = True
    replayed: bool = True
    worker: str | None = None
    """The worker that recorded it, when several did (read back from a training of several
    processes; None otherwise)."""

    def describe(self) -> str:
        """In words: ``step 7: first NaN in the output of `body.2` (its inputs were finite);
        the loss became NaN at the same step`` (``TRAIN step 5 (step 7): ...`` where the mode's
        count differs from the global one)."""
        places = {
            "output": f"the output of `{self.module}`",
            "loss": f"the loss `{self.module}`"
            + (
                " (every module output was finite)"
                if self.replayed
                else " (the sharded model's forward was not run again to find its module)"
            ),
            "gradient": f"the gradient of `{self.module}` (the forward pass was finite)",
            "parameter": (
                f"the parameter `{self.module}`, before the step's forward (the previous "
                "update made it so: its gradient or the optimizer)"
            ),
        }
        if not self.outputs_checked:
            places["loss"] = f"the loss `{self.module}` (the layers' outputs are not checked)"
            places["gradient"] = f"the gradient of `{self.module}` (the loss was finite)"
        where = places.get(self.kind, f"`{self.tensor}`")
        when = step_in_words(self.step, self.mode, self.mode_step)
        text = f"{when}: first {self.what} in {where}"
        if self.worker is not None:
            text += f" on {self.worker}"
        if self.kind == "output" and self.inputs_finite is not None:
            text += " (its inputs were finite)" if self.inputs_finite else " (so were its inputs)"
        if self.kind != "loss":
            if self.loss_step == self.step:
                text += f"; the loss became {self.loss_what} at the same step"
            elif self.loss_step is not None:
                text += f"; the loss became {self.loss_what} at step {self.loss_step}"
        return text

    def to_json(self) -> dict[str, object]:
        """The record as the file holds it."""
        data = asdict(self)
        data["mode"] = self.mode.name
        data.pop("worker")  # the file's own key says it
        return data


def write_nonfinite_origin(out_dir: str, worker: str, origin: NonFiniteOrigin) -> int:
    """Write ``worker``'s record (replacing it atomically); returns the bytes written."""
    data = {"version": _VERSION, "worker": worker, **origin.to_json()}
    path = f"{out_dir.rstrip('/')}/{NONFINITE_DIR}/{worker}{_SUFFIX}"
    return files.write_atomic(path, json.dumps(data, separators=(",", ":")).encode())


def read_nonfinite_origin(out_dir: str) -> NonFiniteOrigin | None:
    """The earliest record of any worker, or None when no worker recorded one."""
    directory = f"{out_dir.rstrip('/')}/{NONFINITE_DIR}"
    if not files.is_dir(directory):
        return None
    found: list[NonFiniteOrigin] = []
    for name in files.list_files(directory, _SUFFIX):
        path = f"{directory}/{name}"
        try:
            data = json.loads(files.read_bytes(path))
            loss_step, inputs_finite = data.get("loss_step"), data.get("inputs_finite")
            found.append(
                NonFiniteOrigin(
                    step=int(data["step"]),
                    mode=ModeKeys[str(data["mode"])],
                    mode_step=int(data["mode_step"]),
                    kind=str(data["kind"]),
                    module=str(data["module"]),
                    tensor=str(data["tensor"]),
                    what=str(data.get("what", "NaN")),
                    inputs_finite=None if inputs_finite is None else bool(inputs_finite),
                    loss_step=None if loss_step is None else int(loss_step),
                    loss_what=str(data.get("loss_what", "NaN")),
                    saved_in_full=bool(data.get("saved_in_full", False)),
                    outputs_checked=bool(data.get("outputs_checked", True)),
                    replayed=bool(data.get("replayed", True)),
                    worker=str(data.get("worker", name.removesuffix(_SUFFIX))),
                )
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.warning("trainprobe: skipping %s, not a non-finite record: %s", path, error)
    if not found:
        return None
    first = min(found, key=_earliest_cause)
    return first if len(found) > 1 else replace(first, worker=None)


_CAUSES = ("output", "parameter", "loss", "gradient")


def _earliest_cause(origin: NonFiniteOrigin) -> tuple[int, int, str]:
    """The order in which workers' records name the training's origin (see the module
    docstring)."""
    cause = _CAUSES.index(origin.kind) if origin.kind in _CAUSES else len(_CAUSES)
    return origin.step, cause, origin.worker or ""
