"""What the job page marks on its charts, by step, and the slow steps it counts.

Three kinds of mark, each read from what its source records: the flight recorder's captures
(``storage.flight_captures``: at the slow step that triggered one, or the first step a request
captured), the spikes the in-training rules saw (``storage.spike_records``), and the debugging
rules' findings (their first issue's step, from the rules' cards). A mark has a short label for
the chart ("capture", "LossSpike spike") and a sentence for its hover text.

The step-duration chart counts slow steps as the flight recorder counted them: the slow steps
its captures were triggered by, each with the median of its mode's recent steps and the
threshold it crossed (the recorder's own test, ``capture.slow_step``), not a test of its own.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainprobe.storage.flight_captures import Capture
from trainprobe.storage.spike_records import SpikeRecord

__all__ = [
    "CapturedSlowStep",
    "Mark",
    "MarkKind",
    "capture_marks",
    "finding_marks",
    "slow_steps",
    "spike_marks",
]

_TRIGGERS = {"slow_step": "slow step", "request": "requested", "rule": "a rule's action"}


class MarkKind(str, enum.Enum):
    """What a mark on a chart is."""

    CAPTURE = "capture"
    SPIKE = "spike"
    FINDING = "finding"


@dataclass(frozen=True)
class Mark:
    """A mark at global ``step``: its kind, a short ``label``, a sentence (``text``)."""

    step: int
    kind: MarkKind
    label: str
    text: str

    def to_json(self) -> dict[str, Any]:
        """The mark as the job page reads it."""
        return {"step": self.step, "kind": self.kind.value, "label": self.label, "text": self.text}


@dataclass(frozen=True)
class CapturedSlowStep:
    """A step the flight recorder judged slow, against its mode's recent steps."""

    node: str
    mode: str
    step: int
    duration_ms: float
    median_ms: float | None
    threshold_ms: float | None

    def to_json(self) -> dict[str, Any]:
        """The slow step as the job page reads it."""
        return {
            "node": self.node,
            "mode": self.mode,
            "step": self.step,
            "durationMs": self.duration_ms,
            "medianMs": self.median_ms,
            "thresholdMs": self.threshold_ms,
        }


def capture_marks(captures: Iterable[Capture]) -> list[Mark]:
    """A mark for each capture, at the step its trigger names."""
    return [
        Mark(
            capture.trigger_step,
            MarkKind.CAPTURE,
            "capture",
            f"Capture ({_TRIGGERS.get(capture.trigger, capture.trigger)}) on {capture.node}: "
            f"{capture.reason}",
        )
        for capture in captures
    ]


def spike_marks(spikes: Iterable[SpikeRecord]) -> list[Mark]:
    """A mark for each spike, at its global step."""
    return [
        Mark(
            spike.step,
            MarkKind.SPIKE,
            f"{spike.rule} spike",
            f"{spike.rule} on {spike.worker}: {spike.describe()}",
        )
        for spike in spikes
    ]


def finding_marks(cards: Iterable[Mapping[str, Any]]) -> list[Mark]:
    """A mark for each debugging rule's first issue (a profiler rule's issue is a window of
    the profile, not a step)."""
    marks = []
    for card in cards:
        step = card.get("issueStep")
        if card.get("kind") != "debugging" or not isinstance(step, int):
            continue
        name, evidence = str(card["name"]), card.get("evidence") or []
        where = card.get("issueWhere") or f"step {step}"
        text = f"{name} found an issue: {evidence[0]}" if evidence else f"{name}: issue at {where}"
        marks.append(Mark(step, MarkKind.FINDING, name, text))
    return marks


def slow_steps(captures: Iterable[Capture]) -> list[CapturedSlowStep]:
    """The slow steps that triggered captures, by step."""
    found = [
        CapturedSlowStep(
            node=capture.node,
            mode=capture.slow_step.mode.upper(),
            step=capture.slow_step.step,
            duration_ms=capture.slow_step.duration_s * 1000.0,
            median_ms=None if capture.median_s is None else capture.median_s * 1000.0,
            threshold_ms=None if capture.threshold_s is None else capture.threshold_s * 1000.0,
        )
        for capture in captures
        if capture.trigger == "slow_step" and capture.slow_step is not None
    ]
    return sorted(found, key=lambda slow: (slow.node, slow.step))
