"""The in-training checks, as the host sees them: the summaries the step wrote, read later.

``capture.keras.step_checks`` judges every TRAIN step inside the compiled step and leaves one
small vector, the step's summary. The hook reads it at the next batch boundaries, without
making the training wait where the backend allows:

- JAX: each step returns its summary as an output (never donated); a summary is read once it is
  computed (``is_ready``), at a later batch boundary (at a step that saves, which waits for the
  training's state anyway, at once: what it found is written before the step's tensors);
- TensorFlow: the step has run when its call returns; the summary is read at the next batch's
  start (on a GPU that read waits for the step);
- PyTorch: on the CPU the same; on a GPU the summary is copied to pinned host memory without
  blocking and read at the next boundary.

With spike rules every summary is read (each spike has its record); with the non-finite check
alone, whose findings stay in every later summary, the latest at most twice a second, at each
saved step and at the end of the epoch's training batches: a clean step then costs the host
nothing, and the update the check names is exact however late it is read.

From the summaries come the same records as from PyTorch's hook, written by the same writers:
the first non-finite update (``storage.nonfinite_file``: the loss, or the first gradient in
backward order, the loss's first non-finite update), each spike with what was done
(``storage.spike_records``), and for StopTraining, or too many skips, the stop request the
job's runner acts on (``storage.stop_request``). With ``steps_per_execution=N`` a summary covers
N updates: the spike counts are exact, the record details the last spike of the N.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trainprobe.capture.in_training_rules import SkipBudget, SpikeRuleConfig
from trainprobe.capture.keras.host_checks import HostChecks
from trainprobe.capture.keras.step_checks import RULE_FIELDS, SUMMARY_FIELDS
from trainprobe.capture.keras.step_state import StepState
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.nonfinite_file import NonFiniteOrigin
from trainprobe.storage.spike_records import SpikeAction, SpikeRecord
from trainprobe.storage.stop_request import StopRequest

__all__ = ["READ_SECONDS", "InTrainingChecks", "Reports"]

log = logging.getLogger("trainprobe")

READ_SECONDS = 0.5
"""With the non-finite check alone, how often the summaries are read between saved steps."""

_KEPT = 8
"""JAX, the non-finite check alone: how many of the last summaries wait to be read."""


@dataclass
class Reports:
    """Where the checks' findings go (the hook has them written and acted on)."""

    origin: Callable[[NonFiniteOrigin], None]
    """The first non-finite update's record, new or updated."""
    spikes: Callable[[], None]
    """The spike records changed (``InTrainingChecks.records``)."""
    stop: Callable[[StopRequest], None]
    """Stop the training."""


def _word(value: float) -> str:
    return "NaN" if math.isnan(value) else "infinity" if math.isinf(value) else "NaN or infinity"


class _Summaries:
    """The step summaries on their way to the host (see the module docstring). ``every``: each
    one is read (spike rules: each spike has its record); else only the latest is (the
    non-finite check's findings stay in every later summary)."""

    def __init__(
        self, step_state: StepState | None, name: str, every: bool, host: HostChecks | None = None
    ) -> None:
        self.state = step_state
        self.name = name
        self.every = every
        self.host = host
        self._pending: list[Any] = []

    def arrived(self, summary: Any) -> None:
        """JAX: a step returned ``summary`` (a device array, computed or not yet)."""
        self._pending.append(summary)
        if not self.every:
            del self._pending[:-_KEPT]

    def ready(self, wait: bool = False) -> list[np.ndarray]:
        """The summaries that can be read now without waiting for the device (``wait``: every
        one, waiting if need be)."""
        if self.host is not None:
            return [self.host.summary.copy()]
        assert self.state is not None
        if not self.state.carried:
            value = self.state.latest(self.name)
            if getattr(value, "is_cuda", False):
                return self._later(value, wait)
            return [self.state.read(self.name)]
        computed = len(self._pending)
        if not wait:
            computed = next(
                (i for i, summary in enumerate(self._pending) if not summary.is_ready()),
                computed,
            )
        taken, self._pending = self._pending[:computed], self._pending[computed:]
        if not self.every:
            taken = taken[-1:]
        return [np.asarray(summary) for summary in taken]

    def _later(self, value: Any, wait: bool) -> list[np.ndarray]:
        """PyTorch on a GPU: start this summary's copy, read those that arrived."""
        from trainprobe.capture.pytorch.host_copy import to_host_later

        self._pending.append(to_host_later(value.detach().clone()))
        found = []
        while self._pending:
            host, event = self._pending[0]
            if event is not None and not wait and not event.query():
                break
            if event is not None:
                event.synchronize()
            found.append(host.numpy().copy())
            self._pending.pop(0)
        return found


class InTrainingChecks:
    """Turns the step summaries into records and actions (see the module docstring)."""

    def __init__(
        self,
        rules: Sequence[SpikeRuleConfig],
        gradient_names: Sequence[tuple[str, str]],
        reports: Reports,
    ) -> None:
        """``gradient_names``: (variable, gradient tensor name) of each checked gradient."""
        self.rules = list(rules)
        self.gradient_names = list(gradient_names)
        self.reports = reports
        self.records: list[SpikeRecord] = []
        self.origin: NonFiniteOrigin | None = None
        self.stopping = False
        self._summaries: _Summaries | None = None
        self._seen_spikes = [0] * len(self.rules)
        self._judged = [0] * len(self.rules)
        self._budgets = [SkipBudget(rule.max_skips, rule.max_skips_window) for rule in rules]
        self._next_read = 0.0
        for rule in self.rules:
            if rule.action is SpikeAction.ROLLBACK:
                log.warning(
                    "trainprobe: %s: the Keras hook does not roll back; a spike's update is "
                    "skipped instead",
                    rule.name,
                )

    def follow(self, step_state: StepState, summary_name: str) -> None:
        """Read the summaries ``step_state`` holds under ``summary_name``."""
        self._summaries = _Summaries(step_state, summary_name, every=bool(self.rules))

    def follow_host(self, checks: HostChecks) -> None:
        """Read the summaries of checks judged on the host."""
        self._summaries = _Summaries(None, "", every=bool(self.rules), host=checks)

    def summary_arrived(self, summary: Any) -> None:
        """JAX: a step returned its summary."""
        if self._summaries is not None:
            self._summaries.arrived(summary)

    def poll(
        self, global_step: Callable[[int], int | None], worker: str, *, wait: bool = False
    ) -> None:
        """Read the summaries that arrived; ``global_step`` maps an update to its step. With
        no spike rule (the non-finite check alone), at most once every ``READ_SECONDS`` unless
        ``wait``: its findings stay in every later summary, and the update they name is exact."""
        if self._summaries is None:
            return
        if not self.rules and not wait:
            now = time.monotonic()
            if now < self._next_read:
                return
            self._next_read = now + READ_SECONDS
        for summary in self._summaries.ready(wait):
            self._read(summary, global_step, worker)

    def judged(self) -> dict[str, dict[str, int]]:
        """How many TRAIN steps each rule judged."""
        return {
            rule.name: {"TRAIN": count}
            for rule, count in zip(self.rules, self._judged, strict=True)
        }

    def rule_names(self) -> dict[str, str]:
        """Each rule configuration's rule, by configuration name."""
        return {rule.name: rule.rule for rule in self.rules}

    # ----- reading a summary -----

    def _read(
        self, summary: np.ndarray, global_step: Callable[[int], int | None], worker: str
    ) -> None:
        header = dict(zip(SUMMARY_FIELDS, summary[: len(SUMMARY_FIELDS)].tolist(), strict=True))
        if header["update"] < 0:
            return  # no update judged yet

        def where(update: float) -> tuple[int, int]:
            mode_step = int(update)
            step = global_step(mode_step)
            return (mode_step if step is None else step), mode_step

        self._read_nonfinite(header, where)
        width = len(RULE_FIELDS)
        changed = False
        for index, rule in enumerate(self.rules):
            start = len(SUMMARY_FIELDS) + index * width
            row = dict(zip(RULE_FIELDS, summary[start : start + width].tolist(), strict=True))
            self._judged[index] = max(self._judged[index], int(row["judged"]))
            changed = self._read_rule(index, rule, row, where, worker) or changed
        if header["stop_update"] >= 0 and not self.stopping:
            self._stop(self._stopping_rule(), int(where(header["stop_update"])[0]))
        if changed:
            self.reports.spikes()

    def _read_nonfinite(
        self, header: dict[str, float], where: Callable[[float], tuple[int, int]]
    ) -> None:
        if header["first_update"] < 0:
            return
        origin = self.origin
        if origin is None:
            step, mode_step = where(header["first_update"])
            loss = header["first_loss"]
            index = int(header["first_gradient"])
            if not math.isfinite(loss) or index < 0:
                kind, module, tensor, what = "loss", "batch_loss", "batch_loss", _word(loss)
            else:
                module, tensor = self.gradient_names[index]
                kind, what = "gradient", _word(header["first_gradient_value"])
            origin = NonFiniteOrigin(
                step=step, mode=ModeKeys.TRAIN, mode_step=mode_step, kind=kind, module=module,
                tensor=tensor, what=what, outputs_checked=False,
            )  # fmt: skip
        if header["loss_update"] >= 0 and origin.loss_step is None:
            step, _ = where(header["loss_update"])
            origin = replace(origin, loss_step=step, loss_what=_word(header["loss_value"]))
        if origin != self.origin:
            self.origin = origin
            self.reports.origin(origin)

    def _read_rule(
        self,
        index: int,
        rule: SpikeRuleConfig,
        row: dict[str, float],
        where: Callable[[float], tuple[int, int]],
        worker: str,
    ) -> bool:
        spikes = int(row["spikes"])
        new = spikes - self._seen_spikes[index]
        if new <= 0:
            return False
        self._seen_spikes[index] = spikes
        if new > 1:
            log.warning(
                "trainprobe: %s: %d more spikes since the last one read", rule.name, new - 1
            )
        update = int(row["update"])
        action = SpikeAction.SKIP if rule.action is SpikeAction.ROLLBACK else rule.action
        budget = self._budgets[index]
        stop = action is SpikeAction.SKIP and not budget.allows_another(update)
        if stop:
            log.warning("trainprobe: %s", budget.too_many(rule.name))
            action = SpikeAction.STOP
        warm = row["warm"] > 0.5
        value = row["value"]
        step, mode_step = where(update)
        record = SpikeRecord(
            rule=rule.name, worker=worker, step=step, mode=ModeKeys.TRAIN, mode_step=mode_step,
            value=value, mean=row["mean"] if warm else None, std=row["std"] if warm else None,
            z=row["z"] if warm and math.isfinite(value) else None, action=action,
            time=time.time(),
        )  # fmt: skip
        self.records.append(record)
        log.warning("trainprobe: %s: %s", rule.name, record.describe())
        if stop:
            self._stop(rule, step)
        return True

    def _stopping_rule(self) -> SpikeRuleConfig:
        return next((r for r in self.rules if r.action is SpikeAction.STOP), self.rules[0])

    def _stop(self, rule: SpikeRuleConfig, step: int) -> None:
        self.stopping = True
        last = next((r for r in reversed(self.records) if r.rule == rule.name), None)
        request = StopRequest(
            rule=rule.name,
            message=last.describe() if last is not None else "a spike",
            step=step,
            time=time.time(),
        )
        self.reports.spikes()
        self.reports.stop(request)
