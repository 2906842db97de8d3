"""The live terminal view of ``trainprobe run``: a panel redrawn under the training's output.

Rendering only. ``trainprobe run`` gathers a ``JobSnapshot`` from the job's files at each poll
and hands it to ``LiveView.show``; ``render_snapshot`` draws one snapshot (the job's status,
the latest step and steps per second, the latest loss with a sparkline of the recent ones, the
learning rate and gradient norm of the latest update, the host's utilisation,
where and why the hook stopped saving if it did, and each rule's status with, for a debugging
rule, the steps it evaluated and skipped, the tensors it checked and the lookups that matched
nothing, so that a rule checking nothing shows while the job runs). A field the snapshot
leaves as None is drawn blank. The training's output and trainprobe's own messages go through
the live console, so they scroll above the panel instead of being overwritten by it. When the
job is over, ``LiveView.finish`` leaves the last panel on screen and prints the end summary
below it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trainprobe.config.statuses import RuleEvaluationStatus, TrainingJobStatus

__all__ = [
    "JobSnapshot",
    "LiveView",
    "RuleStatus",
    "format_loss",
    "render_snapshot",
    "sparkline",
]

_STYLES: dict[str, str] = {
    TrainingJobStatus.IN_PROGRESS: "yellow",  # a job's or a rule's
    TrainingJobStatus.STOPPING: "magenta",
    TrainingJobStatus.STOPPED: "magenta",
    TrainingJobStatus.COMPLETED: "green",
    RuleEvaluationStatus.NO_ISSUES_FOUND: "green",
    RuleEvaluationStatus.ISSUES_FOUND: "bold red",
    TrainingJobStatus.FAILED: "bold red",
    RuleEvaluationStatus.ERROR: "red",
}
# Whole words only: "IssuesFound" must not colour the end of "NoIssuesFound".
_STATUS_WORDS = r"\b(" + "|".join(_STYLES) + r")\b"
_LABEL_WIDTH = 6


@dataclass(frozen=True)
class RuleStatus:
    """One rule's evaluation status as DescribeTrainingJob reports it; a debugging rule's
    counts as its output says (``evaluated`` None where there are none)."""

    name: str
    status: str
    details: str = ""
    evaluated: int | None = None
    skipped: int = 0
    checked: int = 0
    unmatched: int = 0


@dataclass(frozen=True)
class JobSnapshot:
    """What the live view shows of a job at one moment; None where it is not known."""

    name: str
    status: str
    secondary_status: str
    elapsed_seconds: float
    step: int | None = None
    steps_per_second: float | None = None
    loss: float | None = None
    loss_where: str | None = None
    """The step of ``loss`` as the training counts it (``TRAIN step 10 (step 20)``)."""
    recent_losses: tuple[float, ...] = ()
    """The losses of the latest steps, oldest first (every step's, where the hook keeps them)."""
    learning_rate: float | None = None
    gradient_norm: float | None = None
    """The learning rate and the gradient norm of the update at ``loss_where``."""
    cpu_percent: float | None = None
    memory_percent: float | None = None
    gpu_percent: float | None = None
    rules: tuple[RuleStatus, ...] = ()
    saving: str | None = None
    """Where and why the hook stopped saving (a full disk), when it did."""


def format_loss(loss: float) -> str:
    """A loss as the view shows it: five significant digits."""
    return f"{loss:.5g}"


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: tuple[float, ...]) -> str:
    """``values`` as a line of bars, lowest to highest between their minimum and maximum; a
    value that is not finite shows as ``!``."""
    finite = [value for value in values if math.isfinite(value)]
    if len(finite) < 2:
        return ""
    low, span = min(finite), max(finite) - min(finite)

    def bar(value: float) -> str:
        if not math.isfinite(value):
            return "!"
        if span <= 0:
            return _BARS[0]
        return _BARS[min(len(_BARS) - 1, int((value - low) / span * len(_BARS)))]

    return "".join(bar(value) for value in values)


def _update(snapshot: JobSnapshot) -> str:
    parts = []
    if snapshot.learning_rate is not None:
        parts.append(f"learning rate {snapshot.learning_rate:.4g}")
    if snapshot.gradient_norm is not None:
        parts.append(f"gradient norm {snapshot.gradient_norm:.4g}")
    return "  ".join(parts)


def _elapsed(seconds: float) -> str:
    whole = max(0, int(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _status(status: str) -> Text:
    return Text(status, style=_STYLES.get(status, ""))


def _system(snapshot: JobSnapshot) -> str:
    parts = []
    for label, value in (
        ("CPU", snapshot.cpu_percent),
        ("memory", snapshot.memory_percent),
        ("GPU", snapshot.gpu_percent),
    ):
        if value is not None:
            parts.append(f"{label} {value:.0f}%")
    return "  ".join(parts)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _counts(rule: RuleStatus) -> str:
    """``3 steps evaluated, 2 skipped, 0 tensors checked, 1 lookup matched nothing``."""
    if rule.evaluated is None:
        return ""
    text = (
        f"{_plural(rule.evaluated, 'step')} evaluated, {rule.skipped} skipped, "
        f"{_plural(rule.checked, 'tensor')} checked"
    )
    if rule.unmatched:
        text += f", {_plural(rule.unmatched, 'lookup')} matched nothing"
    return text


def _issue(rule: RuleStatus) -> str:
    """The first line of the rule's details, naming the rule unless they already do."""
    first = rule.details.strip().splitlines()[0]
    return first if first.startswith(rule.name) else f"{rule.name}: {first}"


def render_snapshot(snapshot: JobSnapshot) -> RenderableType:
    """The panel for ``snapshot``: job, step, loss, system and rules rows."""
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold", min_width=_LABEL_WIDTH, no_wrap=True)
    fields.add_column(min_width=24)
    fields.add_column(style="dim", min_width=16)
    job = _status(snapshot.status)
    if snapshot.secondary_status and snapshot.secondary_status != snapshot.status:
        job.append(f" ({snapshot.secondary_status})")
    fields.add_row("job", job, f"elapsed {_elapsed(snapshot.elapsed_seconds)}")
    rate = "" if snapshot.steps_per_second is None else f"{snapshot.steps_per_second:.2f} steps/s"
    fields.add_row("step", "" if snapshot.step is None else str(snapshot.step), rate)
    loss = "" if snapshot.loss is None else format_loss(snapshot.loss)
    trend = sparkline(snapshot.recent_losses)
    if trend:
        loss = f"{loss}  {trend}"
    at = "" if snapshot.loss is None or snapshot.loss_where is None else snapshot.loss_where
    fields.add_row("loss", loss, at)
    update = _update(snapshot)
    if update:
        fields.add_row("update", update, "")
    fields.add_row("system", _system(snapshot), "")
    if snapshot.saving:
        fields.add_row("saving", Text(snapshot.saving, style="red"), "")
    parts: list[RenderableType] = [fields]
    if snapshot.rules:
        rules = Table.grid(padding=(0, 2))
        rules.add_column(style="bold", min_width=_LABEL_WIDTH, no_wrap=True)
        rules.add_column(no_wrap=True)
        rules.add_column(no_wrap=True)
        rules.add_column(style="dim")  # wraps first when the terminal is narrow
        for number, rule in enumerate(snapshot.rules):
            rules.add_row(
                "rules" if number == 0 else "", rule.name, _status(rule.status), _counts(rule)
            )
        parts += [Text(""), rules]
        # An issue's first line, under the rules and cut to the panel's width.
        indent = " " * (_LABEL_WIDTH + 2)
        parts += [
            Text(indent + _issue(rule), style="dim", no_wrap=True, overflow="ellipsis")
            for rule in snapshot.rules
            if rule.details.strip()
        ]
    border = (
        "red"
        if any(rule.status == RuleEvaluationStatus.ISSUES_FOUND for rule in snapshot.rules)
        else "blue"
    )
    return Panel(
        Group(*parts),
        title=f"trainprobe run: {snapshot.name}",
        title_align="left",
        border_style=border,
        expand=False,
    )


def _visible(line: str) -> str:
    """What a terminal would show of ``line``: text before a carriage return is overwritten."""
    return line.rstrip("\r").rsplit("\r", 1)[-1]


class LiveView:
    """Draws snapshots in a panel at the bottom of the terminal, with output scrolling above.

    It redraws only when shown a snapshot or asked to print (no drawing thread), so the
    caller's polling loop sets the pace and Ctrl-C reaches the caller.
    """

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self._live = Live(
            console=self.console,
            auto_refresh=False,
            transient=False,
            redirect_stdout=True,
            redirect_stderr=True,
        )
        self._started = False

    def __enter__(self) -> LiveView:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def show(self, snapshot: JobSnapshot) -> None:
        """Draw ``snapshot`` in place of the previous one."""
        if not self._started:
            self._live.start()
            self._started = True
        self._live.update(render_snapshot(snapshot), refresh=True)

    def print_output(self, lines: Iterable[str]) -> None:
        """Print lines of the training's output above the panel, as they are (ANSI colours
        kept, never wrapped or read as markup)."""
        for line in lines:
            self.console.print(Text.from_ansi(_visible(line)), soft_wrap=True)

    def print_message(self, text: str) -> None:
        """Print one of trainprobe's own lines above the panel."""
        line = Text(text)
        line.highlight_regex(_STATUS_WORDS, style="bold")
        self.console.print(line, soft_wrap=True)

    def finish(self, summary: Iterable[str]) -> None:
        """Leave the last panel on screen and print the end summary below it, with the rules'
        statuses coloured."""
        self.close()
        for text in summary:
            line = Text(text)
            for word, style in _STYLES.items():
                line.highlight_regex(rf"\b{word}\b", style=style)
            self.console.print(line, soft_wrap=True)

    def close(self) -> None:
        """Stop redrawing; the last panel stays on screen. Safe to call more than once."""
        if self._started:
            self._started = False
            self._live.stop()
