"""Loss and gradient-norm spikes, judged inside the step and acted on before the update.

The in-training rules ``LossSpike`` and ``GradientNormSpike`` (see ``capture.spike_window`` for
when a value is a spike) judge every step, not only the saved ones: the loss the hook found for
the step, or the norm of every gradient the optimizer is about to apply. A TRAIN step is judged
in ``optimizer.step()``'s pre-hook, so that its rule's action takes effect on this very update:

- **skip** (``SkipStep``): every gradient of the optimizer is dropped before it steps, so the
  update is a no-op: the parameters, the optimizer's state and its step counts stay exactly as
  they were; the learning-rate scheduler's next ``step()`` is skipped with it;
- **rollback** (``Rollback(steps, lr_factor)``): the model and the optimizer go back to the
  snapshot kept in memory every ``steps`` updates (on the model's device), the learning rates are
  scaled by ``lr_factor``, and the update is skipped; the batches since the snapshot are not
  seen again. A model whose snapshot would exceed ``ROLLBACK_LIMIT_BYTES`` is skipped instead,
  said once in the log;
- **stop** (``StopTraining``): a stop request is written and the training stops before the
  update, so the last weights are the healthy ones.

More than ``max_skips`` skips or rollbacks within ``max_skips_window`` updates stop the training
instead: a threshold below the training's normal noise cannot silently skip all of it. In a
distributed training every rank takes the same decision: when a rule acts, the spike flag is
all-reduced (max) once a step, and a rank records only the spikes of its own loss. The gradient
norm judged is the global one, also of sharded gradients (``update_summary``). EVAL and PREDICT
losses are judged too (each mode has its own window), with no action. Each spike becomes a
``SpikeRecord`` (``storage.spike_records``).

A rule's configuration is read by ``capture.in_training_rules``, as the Keras hook reads it:
its parameters and defaults are the catalogue's, its actions read by ``parse_actions``, so a
value the configuration refuses is refused here with the same message. Actions are
``SpikeAction``s. The values judged at an update come from its summary (``update_summary``):
the one pass over the gradients that the non-finite guard reads too, and one copy to the host.

Where reading a value on the host would wait for the device (a GPU), the clean path does not:
when every rule's action is none, or SkipStep with a fused optimizer (``fused=True``), each rule
judges on the device (``DeviceSpikeWindow``), a spike skips the update through the optimizer's
``found_inf`` (the update and the optimizer's state stay exactly as they were, as a
``GradScaler`` skips), the flag is all-reduced on the device, and the verdicts are copied to the
host without blocking and read a step late: the spike's record, the scheduler's skipped step and
the limit on skips follow one step after the skip itself. Rollback, StopTraining and SkipStep
with an optimizer that is not fused decide on the host: one synchronisation a step.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from trainprobe.capture.in_training_rules import SkipBudget, SpikeRuleConfig, spike_rule_configs
from trainprobe.capture.pytorch.device_spike_window import VERDICT_FIELDS, DeviceSpikeWindow
from trainprobe.capture.pytorch.host_copy import host_reads_are_free
from trainprobe.capture.pytorch.update_summary import UpdateSummary
from trainprobe.capture.spike_window import SpikeWindow
from trainprobe.capture.stop_request import TrainingStopRequested
from trainprobe.config.actions import Rollback
from trainprobe.config.rules import Rule
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.spike_records import SpikeAction, SpikeRecord
from trainprobe.storage.stop_request import StopRequest, write_stop_request

__all__ = ["ROLLBACK_LIMIT_BYTES", "SpikeGuard", "SpikeRule", "spike_rules"]

log = logging.getLogger("trainprobe")

ROLLBACK_LIMIT_BYTES = 4 << 30
"""The largest snapshot (model and optimizer state) a rollback keeps."""


@dataclass
class SpikeRule:
    """One configured in-training rule (``config``) and what it has judged so far."""

    config: SpikeRuleConfig
    windows: dict[ModeKeys, SpikeWindow] = field(default_factory=dict)
    device_windows: dict[ModeKeys, DeviceSpikeWindow] = field(default_factory=dict)
    judged: dict[ModeKeys, int] = field(default_factory=dict)
    budget: SkipBudget = field(init=False)

    def __post_init__(self) -> None:
        self.budget = SkipBudget(self.config.max_skips, self.config.max_skips_window)

    @property
    def name(self) -> str:
        """The rule configuration's name."""
        return self.config.name

    @property
    def action(self) -> SpikeAction:
        """What the rule does at a spike of a TRAIN step."""
        return self.config.action

    def judge(self, mode: ModeKeys, value: float) -> tuple[bool, float | None, float | None, Any]:
        """Judge a value of ``mode``: (spike, window mean, deviation, z)."""
        window = self.windows.get(mode)
        if window is None:
            window = self.windows[mode] = SpikeWindow(self.config.settings)
        self.judged[mode] = self.judged.get(mode, 0) + 1
        verdict = window.judge(value)
        return verdict.spike, verdict.mean, verdict.std, verdict.z

    def judge_on_device(self, mode: ModeKeys, value: torch.Tensor) -> torch.Tensor:
        """Judge a value of ``mode`` on its device: the verdict as a tensor (``VERDICT_FIELDS``)."""
        window = self.device_windows.get(mode)
        if window is None:
            settings = self.config.settings
            window = self.device_windows[mode] = DeviceSpikeWindow(settings, value.device)
        self.judged[mode] = self.judged.get(mode, 0) + 1
        return window.judge(value)


def spike_rules(rules: Iterable[Mapping[str, Any] | Rule]) -> list[SpikeRule]:
    """The in-training rules among ``rules`` (configuration entries or SDK ``Rule`` objects),
    read by ``capture.in_training_rules``. ConfigError names a bad field, as the configuration
    does."""
    return [SpikeRule(config) for config in spike_rule_configs(rules)]


class SpikeGuard:
    """Runs a hook's in-training spike rules (see the module docstring).

    ``on_record`` receives each spike's record (the hook has it written); ``out_dir`` is where a
    stop request goes; ``models`` gives the registered models (for a rollback's snapshot);
    ``before_stop`` is called before a stop request is written (the job's runner may end the
    training as soon as it sees one: what the rules need must be on disk by then).
    """

    def __init__(
        self,
        rules: list[SpikeRule],
        on_record: Callable[[SpikeRecord], None],
        out_dir: str,
        models: Callable[[], list[torch.nn.Module]],
        before_stop: Callable[[], None] = lambda: None,
    ) -> None:
        self.rules = rules
        self._before_stop = before_stop
        self.records: list[SpikeRecord] = []
        self._on_record = on_record
        self._out_dir = out_dir
        self._models = models
        self._updates = 0
        self._skipped_schedulers = 0
        self._snapshot: tuple[int, list[dict[str, Any]], dict[str, Any]] | None = None
        self._snapshot_too_large = False
        self._scheduler_step: Any = None
        self._schedulers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._pending: deque[_Pending] = deque()
        self._found_inf_set: set[int] = set()

    @property
    def loss_rules(self) -> list[SpikeRule]:
        return [rule for rule in self.rules if rule.config.judges_loss]

    def start(self) -> None:
        """Skip a scheduler's step after a skipped update (patches ``LRScheduler.step``)."""
        scheduler = torch.optim.lr_scheduler.LRScheduler
        original = scheduler.step
        self._scheduler_step = original
        guard = self

        def step(scheduler_self: Any, *args: Any, **kwargs: Any) -> Any:
            guard._schedulers.add(scheduler_self)
            if guard._skipped_schedulers > 0 and args == () and not kwargs:
                guard._skipped_schedulers -= 1
                return None
            return original(scheduler_self, *args, **kwargs)

        scheduler.step = step  # type: ignore[method-assign,assignment]

    def stop(self) -> None:
        """Restore ``LRScheduler.step``."""
        if self._scheduler_step is not None:
            torch.optim.lr_scheduler.LRScheduler.step = self._scheduler_step  # type: ignore[method-assign]
            self._scheduler_step = None

    # ----- judging -----

    @property
    def wants_gradient_norm(self) -> bool:
        """Whether a rule judges the gradients' global norm (the summary computes it)."""
        return any(not rule.config.judges_loss for rule in self.rules)

    def judge_update(
        self,
        optimizer: torch.optim.Optimizer,
        summary: UpdateSummary,
        where: tuple[int, ModeKeys, int, str],
    ) -> None:
        """Judge a TRAIN step in its optimizer's pre-hook and act before the update, from the
        update's ``summary`` (its loss, its gradients' norm).

        ``where`` is (step, mode, mode step, worker). Raises TrainingStopRequested to stop.
        """
        update = self._updates
        self._updates += 1
        self.read_pending()
        loss = summary.loss
        if self._judges_on_device(optimizer, loss):
            self._judge_on_device(optimizer, summary, where, update)
            return
        step, mode, mode_step, worker = where
        found: list[tuple[SpikeRule, float, float | None, float | None, Any]] = []
        for rule in self.rules:
            judged = _value(rule, summary)
            if judged is None:
                continue
            number = float(judged)
            spike, mean, std, z = rule.judge(mode, number)
            if spike:
                found.append((rule, number, mean, std, z))
        # Acting on a spike needs every rank's agreement (one all-reduce of a flag); recording
        # it does not: each rank records its own.
        acting = any(rule.action is not SpikeAction.NONE for rule in self.rules)
        if not (_any_rank(bool(found)) if acting else found):
            self._keep_snapshot(update, optimizer)
            return
        # Every rank acts on a spike of any rank; each records only its own.
        rule = max([item[0] for item in found] or self.rules, key=lambda r: r.action.strength)
        action = rule.action
        skips = (SpikeAction.SKIP, SpikeAction.ROLLBACK)
        if action in skips and not rule.budget.allows_another(update):
            self._too_many_skips(rule)
            action = SpikeAction.STOP
        if action is SpikeAction.ROLLBACK and not self._roll_back(optimizer, rule.config.rollback):
            action = SpikeAction.SKIP
        if action in skips:
            _drop_gradients(optimizer)
            self._skipped_schedulers += 1
        for spiking, seen, mean, std, z in found:
            taken = action if spiking is rule else SpikeAction.NONE
            self._record(spiking, seen, mean, std, z, taken, (step, mode, mode_step, worker))
        if action is SpikeAction.STOP:
            self._stop(rule, step)

    def _judges_on_device(
        self, optimizer: torch.optim.Optimizer, loss: torch.Tensor | None
    ) -> bool:
        """Whether this update is judged on the device (see the module docstring)."""
        if loss is not None:
            device = loss.device
        else:
            first = next((p for group in optimizer.param_groups for p in group["params"]), None)
            if first is None:
                return False
            device = first.device
        if host_reads_are_free(device):
            return False
        actions = {rule.action for rule in self.rules}
        if not actions <= {SpikeAction.NONE, SpikeAction.SKIP}:
            return False
        return SpikeAction.SKIP not in actions or bool(optimizer.defaults.get("fused"))

    def _judge_on_device(
        self,
        optimizer: torch.optim.Optimizer,
        summary: UpdateSummary,
        where: tuple[int, ModeKeys, int, str],
        update: int,
    ) -> None:
        judged: list[tuple[SpikeRule, torch.Tensor]] = []
        for rule in self.rules:
            value = _value(rule, summary)
            if value is not None:
                judged.append((rule, rule.judge_on_device(where[1], value)))
        if not judged:
            return
        verdicts = torch.stack([verdict for _, verdict in judged])
        skipping = any(rule.action is SpikeAction.SKIP for rule, _ in judged)
        flag = verdicts[:, 0].amax()
        if skipping:  # every rank skips together
            flag = _any_rank_on_device(flag)
        if skipping:
            found = flag.to(torch.float32)
            existing = getattr(optimizer, "found_inf", None)
            if existing is None:
                optimizer.found_inf = found  # type: ignore[attr-defined]
                self._found_inf_set.add(id(optimizer))
            else:  # a GradScaler's, for this same step
                found = found.to(existing.device).reshape(existing.shape)
                optimizer.found_inf = torch.maximum(existing, found)  # type: ignore[attr-defined]
        row = torch.cat([verdicts.flatten(), flag.reshape(1).double()])
        offset = summary.add(row)  # sent to the host with the summary, in one copy
        rules = [rule for rule, _ in judged]
        self._pending.append(_Pending(rules, summary, offset, where, skipping, update))

    def after_update(self, optimizer: torch.optim.Optimizer) -> None:
        """The optimizer stepped: take back the ``found_inf`` this guard gave it."""
        if id(optimizer) in self._found_inf_set:
            self._found_inf_set.discard(id(optimizer))
            with contextlib.suppress(AttributeError):
                del optimizer.found_inf  # type: ignore[attr-defined]

    def read_pending(self, wait: bool = False) -> None:
        """Record the spikes of the updates judged on the device, once their verdicts are on
        the host (``wait``: at the end, wait for them). May raise TrainingStopRequested."""
        while self._pending:
            pending = self._pending[0]
            if not wait and not pending.summary.ready():
                return
            self._pending.popleft()
            width = len(VERDICT_FIELDS)
            end = pending.offset + len(pending.rules) * width + 1
            values = pending.summary.read()[pending.offset : end]
            flag = values[-1] > 0.5
            stopping: SpikeRule | None = None
            for index, rule in enumerate(pending.rules):
                spike, value, mean, std, z, warm = values[index * width : (index + 1) * width]
                if spike < 0.5:
                    continue
                skipped = pending.skipping and rule.action is SpikeAction.SKIP
                warmed = warm > 0.5
                self._record(
                    rule,
                    value,
                    mean if warmed else None,
                    std if warmed else None,
                    z if warmed and math.isfinite(z) else None,
                    SpikeAction.SKIP if skipped else SpikeAction.NONE,
                    pending.where,
                )
                if skipped and not rule.budget.allows_another(pending.update):
                    stopping = rule
            if flag and pending.skipping:
                self._skipped_schedulers += 1
            if stopping is not None and not wait:
                self._too_many_skips(stopping)
                self._stop(stopping, pending.where[0])

    def _too_many_skips(self, rule: SpikeRule) -> None:
        log.warning("trainprobe: %s", rule.budget.too_many(rule.name))

    def judge_loss(self, loss: torch.Tensor, where: tuple[int, ModeKeys, int, str]) -> None:
        """Judge a step's loss where no update follows (EVAL, PREDICT): recorded, no action."""
        mode = where[1]
        number = float(loss)
        for rule in self.loss_rules:
            spike, mean, std, z = rule.judge(mode, number)
            if spike:
                self._record(rule, number, mean, std, z, SpikeAction.NONE, where)

    def _record(
        self,
        rule: SpikeRule,
        value: float,
        mean: float | None,
        std: float | None,
        z: Any,
        action: SpikeAction,
        where: tuple[int, ModeKeys, int, str],
    ) -> None:
        step, mode, mode_step, worker = where
        record = SpikeRecord(
            rule=rule.name,
            worker=worker,
            step=step,
            mode=mode,
            mode_step=mode_step,
            value=value,
            mean=mean,
            std=std,
            z=None if z is None else float(z),
            action=action,
            time=time.time(),
        )
        self.records.append(record)
        log.warning("trainprobe: %s: %s", rule.name, record.describe())
        self._on_record(record)

    def rule_names(self) -> dict[str, str]:
        """Each rule configuration's rule, by configuration name."""
        return {rule.name: rule.config.rule for rule in self.rules}

    def judged(self) -> dict[str, dict[str, int]]:
        """How many steps each rule judged, by mode."""
        return {
            rule.name: {mode.name: count for mode, count in rule.judged.items()}
            for rule in self.rules
        }

    # ----- actions -----

    def _keep_snapshot(self, update: int, optimizer: torch.optim.Optimizer) -> None:
        rollbacks = [rule.config.rollback for rule in self.rules]
        steps = [rollback.steps for rollback in rollbacks if rollback is not None]
        if not steps or self._snapshot_too_large or update % min(steps) != 0:
            return
        models = self._models()
        size = sum(
            tensor.numel() * tensor.element_size()
            for model in models
            for tensor in model.state_dict().values()
        )
        if size * 3 > ROLLBACK_LIMIT_BYTES:  # the model, and an optimizer's state of twice it
            self._snapshot_too_large = True
            log.warning(
                "trainprobe: the model is too large to keep a snapshot for a rollback "
                "(%d MB); a spike skips its update instead",
                size >> 20,
            )
            return
        weights = [
            {key: value.detach().clone() for key, value in model.state_dict().items()}
            for model in models
        ]
        first = self._snapshot is None
        self._snapshot = (update, weights, copy.deepcopy(optimizer.state_dict()))
        if first:
            log.info(
                "trainprobe: Rollback keeps the model and optimizer as of every %d updates "
                "(a copy of about %d MB, on their device)",
                min(steps),
                (size * 3) >> 20,
            )

    def _roll_back(self, optimizer: torch.optim.Optimizer, rollback: Rollback | None) -> bool:
        if self._snapshot is None or rollback is None:
            return False
        lr_factor = rollback.lr_factor
        update, weights, state = self._snapshot
        with torch.no_grad():
            for model, saved in zip(self._models(), weights, strict=False):
                model.load_state_dict(saved)
        optimizer.load_state_dict(copy.deepcopy(state))
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * lr_factor
        for scheduler in [s for s in self._schedulers if s.optimizer is optimizer]:
            scheduler.base_lrs = [lr * lr_factor for lr in scheduler.base_lrs]
        log.warning(
            "trainprobe: rolled the model and optimizer back to update %d (%d updates ago)%s",
            update,
            self._updates - 1 - update,
            f", learning rates x {lr_factor:g}" if lr_factor != 1 else "",
        )
        return True

    def _stop(self, rule: SpikeRule, step: int) -> None:
        last = self.records[-1] if self.records else None
        request = StopRequest(
            rule=rule.name,
            message=last.describe() if last is not None else "a spike on another rank",
            step=step,
            time=time.time(),
        )
        self._before_stop()
        try:
            write_stop_request(self._out_dir, request)
        except OSError as error:
            log.warning("trainprobe: the stop request could not be written: %s", error)
        raise TrainingStopRequested(request, step)


@dataclass
class _Pending:
    """An update judged on the device, its verdicts on their way to the host."""

    rules: list[SpikeRule]
    summary: UpdateSummary
    offset: int
    """Where the verdicts start in what the summary sends."""
    where: tuple[int, ModeKeys, int, str]
    skipping: bool
    update: int


def _any_rank_on_device(flag: torch.Tensor) -> torch.Tensor:
    """``flag`` max-ed over the ranks of a distributed training, on the device (no host read)."""
    distributed = torch.distributed
    if not (distributed.is_available() and distributed.is_initialized()):
        return flag
    flag = flag.clone()
    distributed.all_reduce(flag, op=distributed.ReduceOp.MAX)
    return flag


def _value(rule: SpikeRule, summary: UpdateSummary) -> torch.Tensor | None:
    """What ``rule`` judges of an update: the gradients' global norm, or the step's loss."""
    return summary.loss if rule.config.judges_loss else summary.gradient_norm


def _drop_gradients(optimizer: torch.optim.Optimizer) -> None:
    """Make the optimizer's coming step a no-op: it skips every parameter without a gradient."""
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            parameter.grad = None


def _any_rank(flag: bool) -> bool:
    """``flag`` or-ed over the ranks of a distributed training (one all-reduce)."""
    distributed = torch.distributed
    if not (distributed.is_available() and distributed.is_initialized()):
        return flag
    backend = distributed.get_backend()
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else "cpu"
    tensor = torch.tensor([1.0 if flag else 0.0], device=device)
    distributed.all_reduce(tensor, op=distributed.ReduceOp.MAX)
    return bool(tensor.item())
