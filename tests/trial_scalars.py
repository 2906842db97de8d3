"""What the trial reads of every scalar of an output, one step at a time: the reference the
scalars kept as chunks (by the writer, or by the UI) are compared with."""

from __future__ import annotations

from pathlib import Path

from trainprobe.storage.modes import ModeKeys
from trainprobe.trials import create_trial

Series = dict[tuple[str, str], tuple[list[int], list[float]]]


def trial_scalars(out_dir: Path | str) -> Series:
    """Each one-element tensor's (steps, values) by (name, mode name), as the trial reads them."""
    trial = create_trial(str(out_dir), timeout=0)
    found: Series = {}
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        for step in tensor.steps():
            value = tensor.value(step)
            if value.size == 1:
                key = (name, (trial.mode(step) or ModeKeys.GLOBAL).name)
                found.setdefault(key, ([], []))[0].append(step)
                found[key][1].append(float(value.reshape(-1)[0]))
    return found
