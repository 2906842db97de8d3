"""The report's debugging rules: each rule's verdict, what it checked, and where a NaN started.

Each debugging rule (built-in or custom) writes ``<job>/rule-output/<name>/status.json``; its
details count the steps it evaluated and skipped, the tensors it checked and the patterns that
matched nothing, and each row keeps those counts and lookups as fields too. When the PyTorch
hook's non-finite guard recorded where the training's first NaN started, the section says so in
one line ("step 7: first NaN in the output of `body.2` ..."). Each loss or gradient-norm spike
the in-training rules saw is listed, with what was done about it ("LossSpike: TRAIN step 37
(step 41): 9.81 (window mean 2.03, ...); the update was skipped"), every one of them: a rule's
status names the first it found.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from trainprobe.config import catalogue
from trainprobe.config.errors import ConfigError
from trainprobe.report.records import Record
from trainprobe.storage import files
from trainprobe.storage.job_layout import RULE_OUTPUT
from trainprobe.storage.nonfinite_file import read_nonfinite_origin
from trainprobe.storage.rule_output import read_status
from trainprobe.storage.spike_records import read_spikes

__all__ = ["DebuggingRuleRow", "DebuggingRules", "SpikeRow", "debugging_rules"]


@dataclass(frozen=True)
class DebuggingRuleRow(Record):
    """One debugging rule's verdict and what it checked."""

    rule: str
    status: str
    status_details: str
    steps_evaluated: int
    steps_skipped: int
    tensors_checked: int
    unmatched: list[str]


@dataclass(frozen=True)
class SpikeRow(Record):
    """A spike an in-training rule saw, and what was done (``text``, in words)."""

    rule: str
    step: int
    action: str
    text: str


@dataclass(frozen=True)
class DebuggingRules(Record):
    """The section: a row per rule, where the first NaN started (in words), the spikes."""

    rules: list[DebuggingRuleRow]
    first_non_finite: str | None
    spikes: list[SpikeRow]


def _is_profiler_rule(name: str) -> bool:
    try:
        return catalogue.get(name).kind == "profiler"
    except ConfigError:
        return False  # a custom rule


def debugging_rules(job_dir: str, debug_output: str, skip: str | None) -> DebuggingRules:
    """The section's content: a row per debugging rule, the first NaN's origin if any, and
    the spikes the in-training rules saw.

    ``skip`` is the ProfilerReport rule's output directory (reported in its own section)."""
    root = os.path.join(job_dir, RULE_OUTPUT)
    rows = []
    for name in files.child_names(root):
        directory = os.path.join(root, name)
        if skip is not None and files.absolute(directory) == files.absolute(skip):
            continue
        status = read_status(directory)
        if status is None or _is_profiler_rule(name):
            continue
        rows.append(
            DebuggingRuleRow(
                rule=name,
                status=status.rule_evaluation_status,
                status_details=status.status_details,
                steps_evaluated=status.steps_evaluated,
                steps_skipped=status.steps_skipped,
                tensors_checked=status.tensors_checked,
                unmatched=list(status.unmatched),
            )
        )
    saved = files.is_dir(debug_output)
    origin = read_nonfinite_origin(debug_output) if saved else None
    spikes = [
        SpikeRow(spike.rule, spike.step, spike.action, spike.describe())
        for spike in (read_spikes(debug_output) if saved else [])
    ]
    return DebuggingRules(
        rules=rows, first_non_finite=None if origin is None else origin.describe(), spikes=spikes
    )
