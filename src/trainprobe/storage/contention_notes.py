"""The flight recorder's contention notes: slow steps the training did not run for, not profiled.

A step much slower than its mode's median, during which the training thread spent most of the
excess waiting for a core (``trainprobe.capture.contention``), was slowed by the machine, not by
the training: the recorder notes it instead of profiling it. Consecutive such steps make one
note. Each training process keeps its notes in one file beside the captures::

    framework/pytorch/flight_recorder/<node>.contention.json

``{"node": ..., "notes": [...], "more": N}``: the first ``MAX_NOTES`` notes, oldest first, and
how many steps were noted after them. The file is rewritten whole (atomically) at each new or
longer note.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from trainprobe.storage import files
from trainprobe.storage.flight_captures import CAPTURES_DIR
from trainprobe.storage.locations import join
from trainprobe.storage.modes import ModeKeys, step_span_in_words

__all__ = [
    "CONTENTION_SUFFIX",
    "MAX_NOTES",
    "ContentionNote",
    "NodeContention",
    "read_contention_notes",
    "write_contention_notes",
]

CONTENTION_SUFFIX = ".contention.json"
MAX_NOTES = 50
"""Notes a training process keeps; steps noted after them are only counted."""


@dataclass
class ContentionNote:
    """Steps ``first_step`` to ``last_step`` (global; of mode ``mode``, a mode's name in lower
    case as the recorder names it) were slow while the training waited for a core.

    ``duration_s``, ``ran_s`` and ``waited_s`` are the steps' wall time, the training thread's time
    on a CPU and its time waiting for one, summed over the steps; ``median_s`` the median step of
    the mode then; ``load`` the machine's load average (1 minute) when the last was judged.
    """

    node: str
    mode: str
    first_step: int
    last_step: int
    first_mode_step: int | None
    last_mode_step: int | None
    start_us: float
    end_us: float
    duration_s: float
    median_s: float
    ran_s: float
    waited_s: float
    load: float | None
    cores: int

    @property
    def steps(self) -> int:
        """How many steps the note covers."""
        return self.last_step - self.first_step + 1

    def where(self) -> str:
        """Its steps as the training counts them: ``TRAIN steps 40-41 (steps 60-61)``."""
        mode = ModeKeys.__members__.get(self.mode.upper())
        return step_span_in_words(
            self.first_step, self.last_step, mode, self.first_mode_step, self.last_mode_step
        )

    def words(self) -> str:
        """``TRAIN step 97 took 0.156 s (the median step 0.021 s); the training ran 0.020 s of
        it and waited 0.130 s for a core: the machine was busy (load 5.2 on 2 cores)``."""
        cores = f"{self.cores} core" + ("" if self.cores == 1 else "s")
        load = f" (load {self.load:.1f} on {cores})" if self.load is not None else ""
        them = "it" if self.steps == 1 else "them"
        return (
            f"{self.where()} took {self.duration_s:.3f} s (the median step "
            f"{self.median_s:.3f} s); the training ran {self.ran_s:.3f} s of {them} and waited "
            f"{self.waited_s:.3f} s for a core: the machine was busy{load}"
        )

    @classmethod
    def from_json(cls, data: Any) -> ContentionNote:
        """A note as the file holds it; ValueError when it is not one."""
        try:
            return cls(
                node=str(data["node"]),
                mode=str(data["mode"]),
                first_step=int(data["first_step"]),
                last_step=int(data["last_step"]),
                first_mode_step=_whole(data.get("first_mode_step")),
                last_mode_step=_whole(data.get("last_mode_step")),
                start_us=float(data["start_us"]),
                end_us=float(data["end_us"]),
                duration_s=float(data["duration_s"]),
                median_s=float(data["median_s"]),
                ran_s=float(data["ran_s"]),
                waited_s=float(data["waited_s"]),
                load=None if data.get("load") is None else float(data["load"]),
                cores=int(data["cores"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a contention note: {error}") from None


def _whole(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class NodeContention:
    """One training process's notes, and how many steps it noted beyond them."""

    node: str
    notes: list[ContentionNote]
    more: int = 0


def _path(profiler_output: str, node: str) -> str:
    return join(profiler_output, f"{CAPTURES_DIR}/{node}{CONTENTION_SUFFIX}")


def write_contention_notes(
    profiler_output: str, node: str, notes: list[ContentionNote], more: int
) -> None:
    """Write ``node``'s notes (and the count of steps noted beyond them), replacing its file."""
    data = {"node": node, "notes": [asdict(note) for note in notes], "more": more}
    files.write_atomic(_path(profiler_output, node), json.dumps(data, indent=1).encode())


def read_contention_notes(profiler_output: str) -> list[NodeContention]:
    """Every training process's notes under ``profiler_output``, by node; an unreadable file is
    skipped."""
    found = []
    root = join(profiler_output, CAPTURES_DIR)
    try:
        names = [name for name in files.list_files(root, CONTENTION_SUFFIX) if "/" not in name]
    except OSError:
        return []
    for name in sorted(names):
        try:
            data = json.loads(files.read_bytes(join(root, name)))
            node = str(data["node"])
            if f"{node}{CONTENTION_SUFFIX}" != name:
                continue  # a file names its own node
            notes = [ContentionNote.from_json(item) for item in data.get("notes") or []]
            found.append(NodeContention(node, notes, int(data.get("more") or 0)))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return found
