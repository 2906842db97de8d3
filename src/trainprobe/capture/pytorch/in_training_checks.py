"""The rules a PyTorch hook judges inside the training's step: the non-finite guard and the spike
rules, run at the step's events.

- The **non-finite guard** (``nonfinite_guard``) keeps what a replay of each forward needs, hears
  the step's losses and outputs, checks the gradients when the optimizer is about to step, and the
  rest when the step ends; when it finds a step non-finite it has the hook save the rest of it in
  full, and its finding written (``side_records``).
- The **spike rules** (``spike_guard``: LossSpike, GradientNormSpike) judge a TRAIN step when its
  optimizer is about to step and act before the update; an EVAL or PREDICT step's loss when it
  ends. Their spikes are written as they are found.

- The **training record** (``update_record``) keeps every TRAIN step's loss, learning rate and
  gradient norm, for the hook's writer. In a training that updates its weights by hand it is
  taken where the step's backward pass ends (a later backward of the step takes it again), and
  handed over when the step ends.

At an update all three read one summary of it (``update_summary``): one pass over the gradients,
whatever is armed, one copy to the host, read a step late on a GPU.

Given an optimizer closure (Lightning's, L-BFGS's), the step's forward and backward run inside the
optimizer's step: both act once the closure ran. A failure of either turns that one off for the
rest of the run (logged once) unless the hook is strict; the training goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch

from trainprobe.capture.pytorch.nonfinite_guard import NonFiniteGuard
from trainprobe.capture.pytorch.side_records import SideRecords
from trainprobe.capture.pytorch.spike_guard import SpikeGuard, spike_rules
from trainprobe.capture.pytorch.training_follower import StepListener
from trainprobe.capture.pytorch.training_losses import LossSource
from trainprobe.capture.pytorch.training_steps import with_closure
from trainprobe.capture.pytorch.update_record import UpdateRecord
from trainprobe.capture.pytorch.update_summary import UpdateSummary, gradients_of
from trainprobe.capture.stop_request import TrainingStopRequested
from trainprobe.capture.writer_thread import RecordedStep
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.spike_records import SpikeRecord

__all__ = ["InTrainingChecks", "Where"]

log = logging.getLogger("trainprobe")

Where = tuple[int, ModeKeys, int, str]
"""A step as a spike's record names it: (step, mode, mode step, worker)."""


class InTrainingChecks(StepListener):
    """Runs a hook's non-finite ``guard`` and in-training spike rules (see the module docstring)
    at the step events it hears, and at the step's start and end, which the hook runs.

    ``records`` writes their findings (None: nothing is written, a dry run); ``where`` gives the
    step in progress; ``step_loss`` its loss so far; ``run(action, *args)`` runs an action as one
    of the hook's entry points (timed as its own, failures contained); ``flush`` has what the
    hook handed its writer written (before a stop); ``owns`` says whether an optimizer updates a
    registered model; ``hand_over`` takes each step's record (None: keep none); ``by_hand`` says
    whether the training updates its weights without ``torch.optim``, and ``parameters`` gives
    the registered models' parameters then (for the record's gradient norm).
    """

    def __init__(
        self,
        guard: NonFiniteGuard | None,
        *,
        strict: bool,
        records: SideRecords | None,
        where: Callable[[], Where],
        step_loss: Callable[[], torch.Tensor | None],
        run: Callable[..., Any],
        flush: Callable[[], None],
        owns: Callable[[Any], bool],
        hand_over: Callable[[RecordedStep], None] | None = None,
        by_hand: Callable[[], bool] = lambda: False,
        parameters: Callable[[], list[torch.Tensor]] = list,
    ) -> None:
        self.guard = guard
        self.spikes: SpikeGuard | None = None
        self.record = UpdateRecord() if hand_over is not None else None
        self.recording = False
        """Whether the step in progress is recorded (in a worker that writes)."""
        self._hand_over = hand_over
        self._by_hand = by_hand
        self._parameters = parameters
        self._taken_by_hand: RecordedStep | None = None
        """The record of a step updated by hand, taken at its last backward so far."""
        self.strict = strict
        self.guarding = False
        """Whether the guard checks the step in progress."""
        self.replaying = False
        """Whether the guard is running a forward again (the hook's own hooks stand aside)."""
        self._records = records
        self._where = where
        self._step_loss = step_loss
        self._run = run
        self._flush = flush
        self._owns = owns
        self._spikes_announced = False

    def arm_spikes(
        self,
        rules: Sequence[Any],
        out_dir: str,
        models: Callable[[], list[torch.nn.Module]],
    ) -> None:
        """Judge the in-training spike rules among ``rules`` (``Rule`` objects or their
        configuration dictionaries), if there are any."""
        found = spike_rules(rules)
        if not found:
            return
        self.spikes = SpikeGuard(found, self._on_spike, out_dir, models, self._flush_spikes)
        self.spikes.start()

    @property
    def armed(self) -> bool:
        """Whether anything is judged or recorded at the updates."""
        return self.guard is not None or self.spikes is not None or self.record is not None

    @property
    def hears_losses(self) -> bool:
        """Whether a loss module's output is wanted at every step (the spike rules judge it, the
        record keeps it)."""
        return self.spikes is not None or self.record is not None

    # ----- the step -----

    def begin_step(self, step: int, mode: ModeKeys, mode_step: int) -> None:
        """A step starts (in a worker that writes)."""
        self.recording = self.record is not None
        guard = self.guard
        if guard is not None:
            guard.begin(step, mode, mode_step)
            self.guarding = guard.on

    def step_begun(self, *, saved: bool) -> bool:
        """The hook has begun the step (``saved``: it saves some of it): the spikes' evaluators
        learn early that the training judges them. True when the step is to be saved in full
        (it follows a non-finite step found a step late)."""
        if self.spikes is not None and (saved or not self._spikes_announced):
            self._spikes_announced = True
            self.write_spikes()
        guard = self.guard
        if guard is not None and guard.save_next_in_full:
            guard.save_next_in_full = False
            return True
        return False

    def forward_starting(
        self, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """A forward of the step starts: the guard keeps what a replay of it needs."""
        if self.guarding and not self.replaying:
            self._check_nonfinite(lambda guard: guard.keep_forward(model, args, kwargs))

    def loss_heard(
        self, source: LossSource, name: str, loss: torch.Tensor, module: torch.nn.Module | None
    ) -> None:
        """A loss of the step in progress."""
        if self.guarding and self.guard is not None:
            self.guard.add_loss(name, loss)

    def forward_ended(self, model: torch.nn.Module, outputs: Any) -> None:
        """A model's forward returned ``outputs`` (checked when the step computes no loss)."""
        if self.guarding and self.guard is not None:
            self.guard.add_output(outputs)

    def end_step(self, loss: torch.Tensor | None) -> None:
        """The step ends with ``loss`` (its first loss, if any): an EVAL or PREDICT loss is
        judged; the guard checks what the step computed since its last check."""
        if loss is not None:
            self._judge_loss(loss)
        taken, self._taken_by_hand = self._taken_by_hand, None
        if taken is not None and self._hand_over is not None:
            self._hand_over(taken)
        guard = self.guard
        if guard is None:
            return
        self._check_nonfinite(NonFiniteGuard.finish, always=True)
        self.guarding = guard.on and self.guard is not None
        if guard.unwritten:
            self._write_origin(guard)

    def stop_guarding(self) -> None:
        """This worker writes nothing: the step is not checked, nor recorded."""
        self.guarding = self.recording = False

    # ----- the update -----

    def backward_ended(self) -> None:
        """A backward pass of the training ended. In a training that updates its weights by
        hand, the TRAIN step's record is taken here, from the gradients the pass left (before
        the update and ``zero_grad()`` by hand), with no learning rate."""
        if not self.recording or self.record is None or not self._by_hand():
            return
        where = self._where()
        if where[1] not in (ModeKeys.TRAIN, ModeKeys.GLOBAL):
            return
        gradients = [p.grad for p in self._parameters() if p.grad is not None]
        try:
            summary = UpdateSummary([], gradients or None, self._step_loss())
            taken = self.record.take(None, summary, where[0], where[1], where[2], again=True)
            summary.send()
        except Exception as error:
            self._record_failed(error)
            return
        self._taken_by_hand = taken

    def update_starting(
        self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        """An optimizer of the training is about to step: the non-finite guard checks the
        step's gradients, then the spike rules judge the TRAIN step (after its closure ran)."""
        if not self.armed or not self._owns(optimizer):
            return None
        if self.guarding or self.spikes is not None or self.recording:
            checked = with_closure(args, kwargs, lambda c: self._after_closure(c, optimizer))
            if checked is not None:
                return checked
        self._check_update(optimizer)
        return None

    def update_ended(self, optimizer: Any) -> None:
        """The optimizer stepped."""
        if self.spikes is not None:
            self.spikes.after_update(optimizer)

    def _after_closure(
        self, closure: Callable[[], Any], optimizer: torch.optim.Optimizer
    ) -> Callable[[], Any]:
        def checked() -> Any:
            loss = closure()
            self._check_update(optimizer)
            return loss

        return checked

    def _check_update(self, optimizer: torch.optim.Optimizer) -> None:
        self._run(self._check_update_now, optimizer)

    def _check_update_now(self, optimizer: torch.optim.Optimizer) -> None:
        """The update's summary, one pass for the guard and the spike rules; then each reads
        it: the guard's flags, the spike rules' loss and gradient norm."""
        taken: list[tuple[list[Any], list[torch.Tensor]]] = []
        self._check_nonfinite(lambda guard: taken.append(guard.update_tensors()))
        checked, flagged = taken[0] if taken else ([], [])
        spikes, where = self.spikes, self._where()
        training = where[1] in (ModeKeys.TRAIN, ModeKeys.GLOBAL)
        judging = spikes is not None and training
        recording = self.recording and training
        wants_norm = recording or (judging and spikes is not None and spikes.wants_gradient_norm)
        try:
            summary = UpdateSummary(
                flagged,
                gradients_of(optimizer) if wants_norm else None,
                self._step_loss() if judging or recording else None,
            )
        except Exception as error:
            if flagged:
                self._guard_failed(error)
            if judging:
                self._spikes_failed(error)
            if recording:
                self._record_failed(error)
            return
        recorded = None
        try:
            if checked:
                self._check_nonfinite(lambda guard: guard.check_update(checked, flagged, summary))
            if judging:
                self._judge_update(optimizer, summary, where)
            if recording:
                recorded = self._take_record(optimizer, summary, where)
        finally:
            summary.send()
        if recorded is not None and self._hand_over is not None:
            self._hand_over(recorded)

    def _take_record(
        self, optimizer: torch.optim.Optimizer, summary: UpdateSummary, where: Where
    ) -> RecordedStep | None:
        record = self.record
        if record is None:
            return None
        try:
            return record.take(optimizer, summary, where[0], where[1], where[2])
        except Exception as error:
            self._record_failed(error)
            return None

    def _record_failed(self, error: Exception) -> None:
        """The training record failed: it turns itself off; the rest goes on."""
        if self.strict:
            raise error
        self.record, self.recording = None, False
        log.warning(
            "trainprobe: the training record (every step's loss, learning rate and gradient "
            "norm) stops for the rest of this run (%s: %s); saving and training go on",
            type(error).__name__,
            error,
        )

    def _judge_update(
        self, optimizer: torch.optim.Optimizer, summary: UpdateSummary, where: Where
    ) -> None:
        spikes = self.spikes
        if spikes is None:
            return
        try:
            spikes.judge_update(optimizer, summary, where)
        except TrainingStopRequested:
            raise  # the rule's StopTraining, before the spiking update
        except Exception as error:
            self._spikes_failed(error)

    def _judge_loss(self, loss: torch.Tensor) -> None:
        """An EVAL or PREDICT step's loss: the spike rules judge it (no action)."""
        spikes = self.spikes
        if spikes is None:
            return
        where = self._where()
        if where[1] in (ModeKeys.TRAIN, ModeKeys.GLOBAL):
            return
        try:
            spikes.judge_loss(loss, where)
        except Exception as error:
            self._spikes_failed(error)

    # ----- the guard -----

    def _check_nonfinite(
        self, check: Callable[[NonFiniteGuard], None], *, always: bool = False
    ) -> None:
        """Run one of the guard's checks (``always``: even while it is not guarding the step).
        A replay it makes runs the model's forward: the hook's own forward hooks stand aside."""
        guard = self.guard
        if guard is None or not (self.guarding or always):
            return
        self.replaying = True
        try:
            check(guard)
        except Exception as error:
            self._guard_failed(error)
        finally:
            self.replaying = False

    def _guard_failed(self, error: Exception) -> None:
        """The non-finite guard failed: it turns itself off; saving and training go on."""
        if self.strict:
            raise error
        self.guard, self.guarding = None, False
        log.warning(
            "trainprobe: the non-finite guard stops for the rest of this run (%s: %s); "
            "tensors are still saved as configured",
            type(error).__name__,
            error,
        )

    def _write_origin(self, guard: NonFiniteGuard) -> None:
        """Have where the first NaN started written (before the step ends)."""
        guard.unwritten = False
        if guard.origin is not None and self._records is not None:
            self._records.nonfinite_origin(guard.origin)

    # ----- the spikes -----

    def _spikes_failed(self, error: Exception) -> None:
        if self.strict:
            raise error
        self.spikes = None
        log.warning(
            "trainprobe: the in-training spike rules stop for the rest of this run (%s: %s); "
            "the training goes on without them",
            type(error).__name__,
            error,
        )

    def _on_spike(self, record: SpikeRecord) -> None:
        """A spike rule found a spike: its records are rewritten."""
        self.write_spikes()

    def write_spikes(self) -> None:
        """Have the spikes found so far written, with the steps judged."""
        spikes = self.spikes
        if spikes is None or self._records is None:
            return
        self._records.spikes(list(spikes.records), spikes.judged(), spikes.rule_names())

    def _flush_spikes(self) -> None:
        """Have the spikes written now, before the training stops."""
        try:
            self.write_spikes()
            self._flush()
        except Exception as error:
            log.warning("trainprobe: the spikes could not be written before the stop: %s", error)

    # ----- the end -----

    def stop(self) -> None:
        """The hook closes: the spike rules give ``LRScheduler.step`` back."""
        if self.spikes is not None:
            self.spikes.stop()

    def close(self) -> None:
        """Read what is still on its way to the host, and write the final records."""
        if self.spikes is not None:
            try:
                self.spikes.read_pending(wait=True)
            except Exception as error:
                self._spikes_failed(error)
        self.write_spikes()  # with the final counts of the steps judged
        guard = self.guard
        if guard is not None:
            try:
                guard.close()
            except Exception as error:
                self._guard_failed(error)
            if guard.unwritten:
                self._write_origin(guard)
