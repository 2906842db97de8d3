"""The index file of one (global step, worker): where each tensor's record lies in the event file.

smdebug's JSON, written once when the step's writer closes::

    {"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": "events/.../....tfevents"},
     "tensor_payload": [{"tensorname": "...", "start_idx": 0, "length": 5254}, ...],
     "shape_payload": [{"tensorname": "...", "originalname": "...", "shape": [64, 20]}]}

``start_idx`` and ``length`` cover the whole record, framing included, so one ranged read
fetches one tensor. A step that saved only shapes has no ``event_file_name``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trainprobe.storage.modes import ModeKeys

__all__ = ["ShapeEntry", "StepIndex", "TensorLocation", "decode_index", "encode_index"]


@dataclass(frozen=True)
class TensorLocation:
    """Where one tensor's record is in the step's event file."""

    name: str
    start: int
    length: int


@dataclass(frozen=True)
class ShapeEntry:
    """A tensor's shape, saved without its values (``save_shape``)."""

    name: str
    original_name: str
    shape: tuple[int, ...]


@dataclass
class StepIndex:
    """The content of one index file."""

    step: int
    worker: str
    mode: ModeKeys
    mode_step: int
    event_file: str | None
    tensors: list[TensorLocation] = field(default_factory=list)
    shapes: list[ShapeEntry] = field(default_factory=list)


def encode_index(index: StepIndex) -> bytes:
    """The JSON bytes of an index file, in smdebug's key order."""
    meta: dict[str, Any] = {"mode": index.mode.name, "mode_step": index.mode_step}
    if index.event_file is not None:
        meta["event_file_name"] = index.event_file
    document = {
        "meta": meta,
        "tensor_payload": [
            {"tensorname": t.name, "start_idx": t.start, "length": t.length} for t in index.tensors
        ],
        "shape_payload": [
            {"tensorname": s.name, "originalname": s.original_name, "shape": list(s.shape)}
            for s in index.shapes
        ],
    }
    return json.dumps(document).encode("utf-8")


def decode_index(data: bytes, step: int, worker: str) -> StepIndex:
    """An index file's content; ``step`` and ``worker`` come from its file name.

    Raises ValueError (json.JSONDecodeError, KeyError wrapped) when it is not an index file.
    """
    try:
        document = json.loads(data)
        meta = document["meta"]
        mode_name = meta.get("mode", "GLOBAL")
        mode = ModeKeys[mode_name.rsplit(".", 1)[-1]]
        return StepIndex(
            step=step,
            worker=worker,
            mode=mode,
            mode_step=int(meta.get("mode_step", step)),
            event_file=meta.get("event_file_name"),
            tensors=[
                TensorLocation(t["tensorname"], int(t["start_idx"]), int(t["length"]))
                for t in document.get("tensor_payload") or []
            ],
            shapes=[
                ShapeEntry(
                    s["tensorname"], s.get("originalname", s["tensorname"]), tuple(s["shape"])
                )
                for s in document.get("shape_payload") or []
            ],
        )
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"not an index file: {error!r}") from error
