"""The spikes an in-training rule saw, and what it did about each, one file per worker.

::

    <out_dir>/spikes/<worker>.json
    {"version": 1, "worker": "worker_0", "rules": {"LossSpike": "LossSpike"},
     "judged": {"LossSpike": {"TRAIN": 120, "EVAL": 8}},
     "spikes": [
      {"rule": "LossSpike", "worker": "worker_0", "step": 41, "mode": "TRAIN", "mode_step": 37,
       "value": 9.81, "mean": 2.03, "std": 0.11, "z": 70.7, "action": "skip",
       "time": 1795822751.03}, ...]}

The hook rewrites its worker's file (atomically: spikes are rare) on its writer thread: when it
starts judging, at each spike the in-training rules (``LossSpike``, ``GradientNormSpike``) find,
at save steps (with the counts of steps judged so far) and at the end; the rule's evaluator reads
it for its status and evaluations, and the report shows the spikes. ``rules`` maps each rule
configuration's name (the name a record's ``rule`` and ``judged`` use) to its rule.
``value`` is the loss (or the gradient norm) of the step, ``mean`` and ``std`` those of the
rolling window it was judged against (None while it was warming up), ``z`` the two-sided z-score
(None for a non-finite value, always a spike),
``action`` what was done: "skip" (the update was not applied), "rollback" (the model and
optimizer went back to a snapshot), "stop" (the training stopped before the update) or "none".
A record that cannot be read is skipped with a warning. smdebug ignores this directory.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from enum import Enum

from trainprobe.storage import files
from trainprobe.storage.modes import ModeKeys, step_in_words

__all__ = [
    "ACTIONS",
    "SPIKES_DIR",
    "SpikeAction",
    "SpikeFiles",
    "SpikeRecord",
    "read_judged",
    "read_spike_files",
    "read_spikes",
    "write_spikes",
]

log = logging.getLogger(__name__)

SPIKES_DIR = "spikes"
_VERSION = 1
_SUFFIX = ".json"


class SpikeAction(str, Enum):
    """What an in-training rule did at a spike (its JSON value is the enum's value)."""

    NONE = "none"
    SKIP = "skip"
    """The update was not applied."""
    ROLLBACK = "rollback"
    """The model and optimizer went back to a snapshot (and the update was not applied)."""
    STOP = "stop"
    """The training stopped before the update."""

    def __str__(self) -> str:
        return self.value

    @property
    def strength(self) -> int:
        """Of several rules' actions at one step, the strongest is taken."""
        return _STRENGTH.index(self)


_STRENGTH = (SpikeAction.NONE, SpikeAction.SKIP, SpikeAction.ROLLBACK, SpikeAction.STOP)

ACTIONS = tuple(action.value for action in SpikeAction)
"""Every action's JSON value."""


@dataclass(frozen=True)
class SpikeRecord:
    """One spike: the rule that saw it, the step, the value against its window, the action."""

    rule: str
    worker: str
    step: int
    mode: ModeKeys
    mode_step: int
    value: float
    mean: float | None
    std: float | None
    z: float | None
    action: SpikeAction
    time: float

    def describe(self) -> str:
        """One line for a status or a log: the step, the value against its window, the action."""
        against = (
            f"window mean {self.mean:.4g}, deviation {self.std:.4g}, z {self.z:.1f}"
            if self.mean is not None and self.std is not None and self.z is not None
            else "not finite"
            if not math.isfinite(self.value)
            else "above the ratio to the window mean"
        )
        done = {
            SpikeAction.SKIP: "the update was skipped",
            SpikeAction.ROLLBACK: "the model and optimizer were rolled back",
            SpikeAction.STOP: "the training was stopped before the update",
            SpikeAction.NONE: "no action",
        }[SpikeAction(self.action)]
        when = step_in_words(self.step, self.mode, self.mode_step)
        return f"{when}: {self.value:.4g} ({against}); {done}"


def write_spikes(
    out_dir: str,
    worker: str,
    records: list[SpikeRecord],
    judged: dict[str, dict[str, int]] | None = None,
    rules: dict[str, str] | None = None,
) -> int:
    """Write ``worker``'s spikes, how many steps each rule configuration judged, by mode, and
    each configuration's rule (replacing its file atomically); returns the bytes written."""
    spikes = [
        {**asdict(record), "mode": record.mode.name, "action": str(record.action)}
        for record in records
    ]
    data = {
        "version": _VERSION,
        "worker": worker,
        "rules": rules or {},
        "judged": judged or {},
        "spikes": spikes,
    }
    path = f"{out_dir.rstrip('/')}/{SPIKES_DIR}/{worker}{_SUFFIX}"
    return files.write_atomic(path, json.dumps(data, separators=(",", ":")).encode())


@dataclass(frozen=True)
class SpikeFiles:
    """What every worker's spike file says: the spikes by step, the steps each rule
    configuration judged (by mode, summed over the workers), and each configuration's rule."""

    records: list[SpikeRecord]
    judged: dict[str, dict[str, int]]
    rules: dict[str, str]


def read_spike_files(out_dir: str) -> SpikeFiles:
    """Read every worker's spike file under ``out_dir`` once; a file that cannot be read is
    skipped with a warning."""
    found = SpikeFiles([], {}, {})
    directory = f"{out_dir.rstrip('/')}/{SPIKES_DIR}"
    if not files.is_dir(directory):
        return found
    for name in files.list_files(directory, _SUFFIX):
        path = f"{directory}/{name}"
        try:
            data = json.loads(files.read_bytes(path))
            records = [_record(item) for item in data["spikes"]]
            rules = {str(key): str(value) for key, value in data.get("rules", {}).items()}
            judged = {
                str(rule): {str(mode): int(count) for mode, count in modes.items()}
                for rule, modes in data.get("judged", {}).items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            log.warning("trainprobe: skipping %s, not a spike record: %s", path, error)
            continue
        found.records.extend(records)
        found.rules.update(rules)
        for rule, modes in judged.items():
            counts = found.judged.setdefault(rule, {})
            for mode, count in modes.items():
                counts[mode] = counts.get(mode, 0) + count
    found.records.sort(key=lambda record: (record.step, record.worker))
    return found


def read_spikes(out_dir: str) -> list[SpikeRecord]:
    """Every worker's spikes under ``out_dir``, by step."""
    return read_spike_files(out_dir).records


def read_judged(out_dir: str) -> dict[str, dict[str, int]]:
    """How many steps each in-training rule judged, by mode, summed over the workers."""
    return read_spike_files(out_dir).judged


def _record(data: dict[str, object]) -> SpikeRecord:
    def number(key: str) -> float | None:
        value = data[key]
        return None if value is None else float(value)  # type: ignore[arg-type]

    action = str(data["action"])
    return SpikeRecord(
        rule=str(data["rule"]),
        worker=str(data["worker"]),
        step=int(data["step"]),  # type: ignore[call-overload]
        mode=ModeKeys[str(data["mode"])],
        mode_step=int(data["mode_step"]),  # type: ignore[call-overload]
        value=float(data["value"]),  # type: ignore[arg-type]
        mean=number("mean"),
        std=number("std"),
        z=number("z"),
        action=SpikeAction(action) if action in ACTIONS else SpikeAction.NONE,
        time=float(data["time"]),  # type: ignore[arg-type]
    )
