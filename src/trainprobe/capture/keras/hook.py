"""The Keras hook: a Keras 3 callback that saves a training's tensors by step, smdebug's format.

Usage is smdebug's ``KerasHook``'s, on the TensorFlow, JAX and PyTorch backends alike::

    hook = Hook(out_dir, save_config=SaveConfig(save_interval=100),
                include_collections=["weights", "gradients", "losses"])
    model.fit(x, y, validation_data=(x_val, y_val), callbacks=[hook])
    model.evaluate(x_test, y_test, callbacks=[hook])
    hook.close()

Steps and modes come from the training (``capture.keras.steps``): TRAIN in ``fit``, EVAL in its
validation and in ``evaluate``, PREDICT in ``predict``; a TRAIN step is one update of the
optimizer (its ``iterations``: gradient accumulation and ``steps_per_execution`` do not shift
it), an EVAL or PREDICT step one batch (one execution of ``steps_per_execution`` batches).

What it saves, named as ``capture.keras.naming`` says: losses (the batch's own loss,
``batch_loss``, and Keras's logged running mean, ``loss``) and the other metrics of the logs, the
layers' weights and biases, the gradients the optimizer applied, the optimizer's variables, and
``save_scalar``/``save_tensor`` values. By default, as smdebug's KerasHook, the ``losses``,
``metrics`` and ``sm_metrics`` collections every 500 steps; losses and metrics are also saved at
the last step of every epoch and of every evaluation, whatever the interval (their values then
are Keras's epoch values: the running means over the epoch or the evaluation).

In-training checks (``capture.keras.step_checks``, ``capture.keras.in_training``): every TRAIN
step the compiled step checks that its loss and gradients are finite (``nonfinite_guard``, on by
default) and judges the ``training_rules`` among LossSpike and GradientNormSpike, skipping the
spiking update where a rule's action says so; the host reads what they found later and
writes the same records as PyTorch's hook (``nonfinite/``, ``spikes/``, a stop request).

Cost: the hook never overrides Keras's ``on_*_batch_end``, so Keras keeps dispatching batch ends
asynchronously. A step is saved at the start of the next one (or at the end of its epoch or
evaluation), when the training's state is there to read (``capture.keras.step_saver``): the hook
copies what is due to the host and hands it to the writer thread (``capture.keras.hook_output``),
which computes reductions, encodes and writes. Gradients and the batch's loss come out of the
compiled step through state of the hook's own (``capture.keras.taps``, ``step_state``), never the
model's or the optimizer's; gradients only on the steps that save them.

Failures: an error inside the hook is logged once, saving stops, and the training goes on; with
``strict=True`` (or ``TRAINPROBE_STRICT=1``) it is raised instead. A rule's StopTraining request
stops ``fit`` at the next batch (``model.stop_training``). ``close()`` takes the taps out.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import keras

from trainprobe import settings
from trainprobe.capture.at_exit import close_at_exit
from trainprobe.capture.collections import KERAS_COLLECTIONS, CollectionKeys
from trainprobe.capture.collections import CollectionSet as _CollectionSet
from trainprobe.capture.hook_arguments import (
    check_include_workers,
    output_directory,
    tensorboard_directory,
)
from trainprobe.capture.hook_config_file import DEFAULT_OUT_DIR, read_hook_config
from trainprobe.capture.in_training_rules import spike_rule_configs
from trainprobe.capture.keras import naming
from trainprobe.capture.keras.check_findings import CheckFindings
from trainprobe.capture.keras.hook_output import HookOutput
from trainprobe.capture.keras.profiling import KerasProfiler
from trainprobe.capture.keras.smdebug_calls import SmdebugCalls
from trainprobe.capture.keras.step_saver import StepSaver
from trainprobe.capture.keras.steps import Point, TrainingSteps
from trainprobe.capture.keras.tapped_models import CheckSettings, TappedModels
from trainprobe.capture.keras.training_state import TrainingState
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.capture.save_plan import SavePlan
from trainprobe.capture.stop_request import StopRequestWatch
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys

__all__ = ["ALWAYS_SAVED", "Hook", "get_hook"]

log = logging.getLogger("trainprobe")

ALWAYS_SAVED = (CollectionKeys.METRICS, CollectionKeys.LOSSES, CollectionKeys.SM_METRICS)
"""The collections smdebug's KerasHook saves whatever ``include_collections`` says."""

_P = ParamSpec("_P")
_R = TypeVar("_R")

_singleton: Hook | None = None


def get_hook(json_config_path: str | None = None, create_if_not_exists: bool = True) -> Hook | None:
    """The hook of this process, or one made from the hook configuration file (as smdebug's
    ``smdebug.tensorflow.get_hook``); None when there is neither or ``$USE_SMDEBUG`` says no."""
    if _singleton is None and create_if_not_exists and settings.USE_SMDEBUG.get():
        try:
            Hook.create_from_json_file(json_config_path)
        except FileNotFoundError:
            return None
    return _singleton


def _guarded(method: Callable[_P, _R]) -> Callable[_P, _R | None]:
    """Time a callback and keep its failures out of the training (unless strict)."""

    @functools.wraps(method)
    def entry(*args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        hook = args[0]
        assert isinstance(hook, Hook)
        if hook._failed or hook._closed:
            return None
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        except Exception as error:
            hook._fail(error)
            return None
        finally:
            hook._spent += time.perf_counter() - started

    return entry


class Hook(SmdebugCalls, keras.callbacks.Callback):  # type: ignore[misc]
    """Saves a Keras model's tensors by step into ``out_dir`` (see the module docstring).

    The arguments are smdebug's KerasHook's: ``save_config`` says when (every 500 steps),
    ``reduction_config`` what (the raw tensors), ``include_collections`` which collections
    (``losses``, ``metrics`` and ``sm_metrics`` always), ``include_regex`` adds tensors by name to
    ``default``, ``save_all`` saves everything, ``include_workers`` is ``"one"`` or ``"all"``,
    ``dry_run`` only logs what would be saved, and ``export_tensorboard``/``tensorboard_dir``
    write TensorBoard summaries of what is saved. ``nonfinite_guard`` (on by default) checks
    every TRAIN step's loss and gradients; ``training_rules`` are the rules judged inside the
    training, every step (the LossSpike and GradientNormSpike among SDK ``Rule`` objects or
    the hook configuration's ``TrainingRules`` entries).
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | None = None,
        export_tensorboard: bool = False,
        tensorboard_dir: str | os.PathLike[str] | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | SaveConfigMode | dict[Any, Any] | None = None,
        include_regex: Sequence[str] | str | None = None,
        include_collections: Sequence[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        *,
        strict: bool | None = None,
        nonfinite_guard: bool = True,
        training_rules: Sequence[Any] | None = None,
    ) -> None:
        global _singleton
        super().__init__()
        self.out_dir = output_directory(out_dir)
        check_include_workers(include_workers)
        if reduction_config is not None and not isinstance(reduction_config, ReductionConfig):
            raise ConfigError("reduction_config", reduction_config, "a ReductionConfig or None")
        rules = tuple(spike_rule_configs(training_rules or []))
        self.strict = settings.STRICT.get() if strict is None else bool(strict)
        self.dry_run = bool(dry_run)
        self.include_workers = include_workers
        tensorboard = tensorboard_directory(export_tensorboard, tensorboard_dir, self.out_dir)
        self.tensorboard_dir = tensorboard
        self.export_tensorboard = tensorboard is not None
        self.save_config = SaveConfig.parse(save_config)
        self.reduction_config = reduction_config or ReductionConfig(save_raw_tensor=True)
        self.collections = _CollectionSet(KERAS_COLLECTIONS)
        included = self.collections.select(include_collections, include_regex, bool(save_all))
        self.plan = SavePlan(
            self.collections,
            included,
            self.save_config,
            self.reduction_config,
            always_saved=ALWAYS_SAVED,
        )
        self.steps = TrainingSteps()
        self.stop_watch = StopRequestWatch(self.out_dir)
        self.backend = keras.backend.backend()
        self._failed = self._closed = False
        self._spent = 0.0
        self.output = HookOutput(
            self.out_dir, tensorboard, self.collections.to_json_dict, self._on_writer_error
        )
        self.overhead = self.output.overhead
        self.training = TrainingState(self.backend, lambda: self._model)
        self.findings = CheckFindings(
            self.output, lambda: self.tapped.host_checks, self._stop_training, dry_run=dry_run
        )
        checks = CheckSettings(guard=bool(nonfinite_guard), rules=rules)
        self.tapped = TappedModels(self.backend, self.plan, checks, self.findings.reports)
        self.saver = StepSaver(self.plan, self.output, self.tapped, self.training, dry_run=dry_run)
        self.profiler = KerasProfiler.from_environment(self.backend, self._profiler_failed)
        _singleton = self
        close_at_exit(self, lambda hook: hook.close(), "the Keras hook")

    @classmethod
    def create_from_json_file(cls, json_file_path: str | None = None) -> Hook:
        """A hook configured by a ``DebugHookConfig`` JSON file (found as the other hooks find
        it); FileNotFoundError when there is none. A file that cannot be used is logged and the
        hook returned saves nothing (with ``TRAINPROBE_STRICT=1`` it raises)."""
        try:
            arguments = read_hook_config(json_file_path)
            hook = cls(**arguments.hook_kwargs(), training_rules=arguments.training_rules)
        except FileNotFoundError:
            raise
        except Exception as error:
            if settings.STRICT.get():
                raise
            log.error(
                "trainprobe: the hook configuration cannot be used (%s: %s); the training goes "
                "on without saving tensors",
                type(error).__name__,
                error,
            )
            hook = cls(DEFAULT_OUT_DIR, dry_run=True, strict=True)
            hook._failed = True
            return hook
        for collection_settings in arguments.collections:
            collection_settings.apply(hook.collections)
        return hook

    hook_from_config = create_from_json_file

    # ----- Keras's callbacks (never the batch ends: Keras keeps them asynchronous) -----

    @_guarded
    def on_train_begin(self, logs: Any = None) -> None:
        self._tap(training=True)
        self.steps.begin_fit(self.training.micro_batches(), self.training.accumulation())
        self._begin_run(ModeKeys.TRAIN)

    @_guarded
    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        micro_batches = self.training.micro_batches()
        self.steps.begin_epoch(micro_batches)
        taps = self.tapped.taps_of(self._model)
        if taps is not None:
            taps.align(micro_batches)

    @_guarded
    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        if batch > 0:
            self._step_ended(self.steps.train_batches_done(batch))
        self._check_stop()
        self._before_training_batches()

    @_guarded
    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._end_training_batches()

    @_guarded
    def on_train_end(self, logs: Any = None) -> None:
        self._end_training_batches()
        if self.tapped.training is not None:
            self.tapped.training.set_capture(False)
        self._end_run()
        self.steps.end_fit()
        self.findings.write_spikes()
        self.output.flush()

    @_guarded
    def on_test_begin(self, logs: Any = None) -> None:
        self._end_training_batches()
        self._tap(training=False)
        self._begin_run(ModeKeys.EVAL)

    @_guarded
    def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
        if batch > 0:
            self._step_ended(self.steps.batch_done(ModeKeys.EVAL))
        self.steps.batch_started()
        self._profile_step_start(ModeKeys.EVAL)

    @_guarded
    def on_test_end(self, logs: Any = None) -> None:
        self._step_ended(self.steps.batch_done(ModeKeys.EVAL, last=True))
        self._end_run()

    @_guarded
    def on_predict_begin(self, logs: Any = None) -> None:
        self._begin_run(ModeKeys.PREDICT)

    @_guarded
    def on_predict_batch_begin(self, batch: int, logs: Any = None) -> None:
        if batch > 0:
            self._step_ended(self.steps.batch_done(ModeKeys.PREDICT))
        self.steps.batch_started()
        self._profile_step_start(ModeKeys.PREDICT)

    @_guarded
    def on_predict_end(self, logs: Any = None) -> None:
        self._step_ended(self.steps.batch_done(ModeKeys.PREDICT, last=True))
        self._end_run()

    # ----- the training's batches -----

    def _tap(self, *, training: bool) -> None:
        """Install the taps the model needs (not in a dry run, nor after a failure)."""
        if self._failed or self.dry_run:
            return
        if self.plan.is_stale():
            self.plan.prepare(strict=self.strict)
        model = self._model
        self.tapped.tap(model, training=training)
        collection = self.collections.get(CollectionKeys.OPTIMIZER_VARIABLES)
        for variable in self.tapped.optimizer_variables():
            collection.add_tensor_name(naming.optimizer_variable_name(variable))

    def _begin_run(self, mode: ModeKeys) -> None:
        self.steps.begin_run(mode)
        if self.plan.is_stale():
            self.plan.prepare(strict=self.strict)

    def _end_run(self) -> None:
        self.steps.end_run()
        if self.profiler is not None:
            self.profiler.run_ended()

    def _before_training_batches(self) -> None:
        """Copy the gradients of the coming batches if a step among them saves them."""
        coming = self.steps.coming_train_steps(self.training.steps_per_execution())
        taps = self.tapped.training
        if taps is not None and taps.gradient_variables:
            due = 0
            for step in coming:
                due |= self.plan.due(ModeKeys.TRAIN, step)
            names = self.tapped.gradient_names(self._model) if due else []
            taps.set_capture(bool(due) and self.plan.holds_any(names, due))
        self._profile_step_start(ModeKeys.TRAIN)

    def _end_training_batches(self) -> None:
        """The epoch's training batches ended (its validation or its end): save the last."""
        if self.steps.training_open:
            point = self.steps.train_batches_done(None, self.training.micro_batches())
            self._step_ended(point, wait=True)

    def _step_ended(self, point: Point | None, *, wait: bool = False) -> None:
        """A step has ended: read what the checks found, save what is due."""
        if self.profiler is not None:
            self.profiler.step_ended()
        if point is None:
            return
        due = self.saver.due(point)
        host_checks = self.tapped.host_checks
        if point.mode is ModeKeys.TRAIN and host_checks is not None:
            # A step that saves waits for the training's state anyway: its own checks are read
            # too, so that what they found is written before the step's tensors.
            host_checks.poll(self.steps.global_step, self.output.worker, wait=wait or bool(due))
        full = self.findings.saves_in_full(point.step)
        self.saver.save(point, self._model, due, full=full)
        if due and point.mode is ModeKeys.TRAIN:
            self.findings.write_spikes()
        self.findings.step_saved()
        self.output.account(self.steps.step, self._spent)
        self._spent = 0.0

    def _check_stop(self) -> None:
        request = self.stop_watch.check()
        if request is not None:
            log.warning("trainprobe: stopping the training: %s", request.explain())
            self._stop_training()

    def _stop_training(self) -> None:
        self._model.stop_training = True

    def _profile_step_start(self, mode: ModeKeys) -> None:
        if self.profiler is not None:
            self.profiler.step_started(mode, self.steps.step + 1, self.steps.mode_step(mode) + 1)

    # ----- failures and the end -----

    def _fail(self, error: BaseException) -> None:
        if self.strict:
            raise error
        if self._failed:
            return
        self._failed = True
        log.error(
            "trainprobe: saving the Keras training's tensors failed and stops for the rest of "
            "this run (%s: %s). Training continues; what was already saved under %s is intact. "
            "Pass strict=True to the hook or set %s=1 to stop the training on such errors.",
            type(error).__name__,
            error,
            self.out_dir,
            settings.STRICT.name,
        )
        log.debug("trainprobe: the Keras hook's traceback", exc_info=error)
        self.output.saving_stopped(self.steps.step, error)

    def _on_writer_error(self, error: BaseException) -> None:
        if not self.strict:
            self._fail(error)

    def _profiler_failed(self, error: BaseException) -> None:
        if self.strict:
            raise error

    @property
    def worker(self) -> str:
        """This process's worker name (``worker_0``: one Keras process writes)."""
        return self.output.worker

    @property
    def spent_seconds(self) -> float:
        """The time the hook has taken from the training's thread so far."""
        return self.overhead.total_seconds + self._spent

    def close(self) -> None:
        """Take the taps out; write the collections file and ``training_job_end.ts``, and stop
        the writer."""
        if self._closed:
            return
        self._closed = True
        try:
            self.tapped.remove()
        except Exception as error:  # never the training's problem
            log.warning("trainprobe: the Keras hook's taps could not be taken out: %s", error)
        if self.profiler is not None:
            self.profiler.close()
        if self.dry_run:
            return
        self.output.close(self.steps.step, self._spent)
        self._spent = 0.0
        if self.strict and self.output.error is not None:
            raise self.output.error

    def __repr__(self) -> str:
        return (
            f"<trainprobe.keras.Hook out_dir={self.out_dir!r} step={self.steps.step} "
            f"collections={[c.name for c in self.plan.saved]}>"
        )
