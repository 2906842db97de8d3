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

Cost: the hook never overrides Keras's ``on_*_batch_end``, so Keras keeps dispatching batch ends
asynchronously and reads no value a step for the hook. A step is saved at the start of the next
one (or at the end of its epoch or evaluation), when the training's state is there to read: the
hook copies what is due to the host and hands it to the writer thread, which computes reductions,
encodes and writes. Gradients and the batch's loss come out of the compiled step through
variables the step writes (``capture.keras.taps``); gradients only on the steps that save them.

Failures: an error inside the hook is logged once, saving stops, and the training goes on; with
``strict=True`` (or ``TRAINPROBE_STRICT=1``) it is raised instead. A rule's StopTraining request
stops ``fit`` at the next batch (``model.stop_training``).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ParamSpec, TypeVar

import keras
import numpy as np

from trainprobe import settings
from trainprobe.capture.at_exit import close_at_exit
from trainprobe.capture.collections import KERAS_COLLECTIONS, Collection, CollectionKeys
from trainprobe.capture.collections import CollectionSet as _CollectionSet
from trainprobe.capture.hook_arguments import (
    check_include_workers,
    output_directory,
    tensorboard_directory,
)
from trainprobe.capture.hook_config_file import DEFAULT_OUT_DIR, read_hook_config
from trainprobe.capture.keras import naming
from trainprobe.capture.keras.profiling import KerasProfiler
from trainprobe.capture.keras.steps import Point, TrainingSteps
from trainprobe.capture.keras.taps import GradientTap, LossTap
from trainprobe.capture.keras.values import Reduction, host_copy
from trainprobe.capture.overhead import HookOverhead, OverheadFile
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.capture.save_plan import SavePlan
from trainprobe.capture.stop_request import StopRequestWatch
from trainprobe.capture.tensorboard_export import TensorBoardExport
from trainprobe.capture.writer_thread import (
    CollectionsJob,
    EndStep,
    ShapeRecord,
    SideJob,
    TensorRecord,
    WriterThread,
)
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.reduction_names import reduction_tensor_name

__all__ = ["ALWAYS_SAVED", "Hook", "get_hook"]

log = logging.getLogger("trainprobe")

ALWAYS_SAVED = (CollectionKeys.METRICS, CollectionKeys.LOSSES, CollectionKeys.SM_METRICS)
"""The collections smdebug's KerasHook saves whatever ``include_collections`` says."""

_AT_THE_END = (CollectionKeys.LOSSES, CollectionKeys.METRICS)
"""Saved at the last step of an epoch and of an evaluation, whatever their interval."""

OVERHEAD_WRITE_SECONDS = 60.0

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


class Hook(keras.callbacks.Callback):  # type: ignore[misc]
    """Saves a Keras model's tensors by step into ``out_dir`` (see the module docstring).

    The arguments are smdebug's KerasHook's: ``save_config`` says when (every 500 steps),
    ``reduction_config`` what (the raw tensors), ``include_collections`` which collections
    (``losses``, ``metrics`` and ``sm_metrics`` always), ``include_regex`` adds tensors by name to
    ``default``, ``save_all`` saves everything, ``include_workers`` is ``"one"`` or ``"all"``,
    ``dry_run`` only logs what would be saved, and ``export_tensorboard``/``tensorboard_dir``
    write TensorBoard summaries of what is saved.
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
    ) -> None:
        global _singleton
        super().__init__()
        self.out_dir = output_directory(out_dir)
        check_include_workers(include_workers)
        if reduction_config is not None and not isinstance(reduction_config, ReductionConfig):
            raise ConfigError("reduction_config", reduction_config, "a ReductionConfig or None")
        self.strict = settings.STRICT.get() if strict is None else bool(strict)
        self.dry_run = bool(dry_run)
        self.include_workers = include_workers
        self.tensorboard_dir = tensorboard_directory(
            export_tensorboard, tensorboard_dir, self.out_dir
        )
        self.export_tensorboard = self.tensorboard_dir is not None
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
        self.optimizer: Any = None
        self._gradients: GradientTap | None = None
        self._losses: dict[int, LossTap] = {}
        self._tapped: set[int] = set()
        self._writer: WriterThread | None = None
        self._collections_written = False
        self._pending_scalars: dict[str, np.ndarray] = {}
        self._pending_tensors: dict[str, np.ndarray] = {}
        self._failed = False
        self._closed = False
        self._spent = 0.0
        self.overhead = HookOverhead(_bytes=self._bytes_written, blocked_seconds=self._blocked)
        self._overhead_file = OverheadFile(self.out_dir, self.overhead)
        self._overhead_due_at = time.monotonic() + OVERHEAD_WRITE_SECONDS
        self.profiler = KerasProfiler.from_environment(self.backend, self._profiler_failed)
        _singleton = self
        close_at_exit(self, lambda hook: hook.close(), "the Keras hook")

    # ----- construction from the SageMaker configuration file -----

    @classmethod
    def create_from_json_file(cls, json_file_path: str | None = None) -> Hook:
        """A hook configured by a ``DebugHookConfig`` JSON file (found as the other hooks find
        it); FileNotFoundError when there is none. A file that cannot be used is logged and the
        hook returned saves nothing (with ``TRAINPROBE_STRICT=1`` it raises)."""
        try:
            arguments = read_hook_config(json_file_path)
            hook = cls(**arguments.hook_kwargs())
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

    # ----- smdebug's KerasHook calls -----

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """The optimizer, unchanged: the hook finds the gradients it applies by itself (smdebug
        needed this call to see them)."""
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise ConfigError("optimizer", optimizer, "a keras.optimizers.Optimizer")
        self.optimizer = optimizer
        return optimizer

    def register_model(self, model: Any) -> None:
        """Follow ``model`` (``fit``'s callbacks do it by themselves)."""
        if not isinstance(model, keras.Model):
            raise ConfigError("model", model, "a keras.Model")
        self.set_model(model)

    def set_mode(self, mode: ModeKeys) -> None:
        """Accepted for smdebug's scripts: the mode comes from the training itself."""
        if not isinstance(mode, ModeKeys):
            raise ConfigError("mode", mode, "a trainprobe.keras.modes value")

    def get_collection(self, name: str, create: bool = True) -> Collection:
        """The collection ``name`` (created if missing and ``create``)."""
        return self.collections.get(name, create=create)

    def get_collections(self) -> dict[str, Collection]:
        """Every collection of this hook, by name."""
        return {collection.name: collection for collection in self.collections}

    def add_collection(self, collection: Collection) -> None:
        """Add a collection built by hand (saved if named in ``include_collections``)."""
        self.collections.add(collection)

    def save_scalar(self, name: str, value: object, sm_metric: bool = False) -> None:
        """Save ``value`` as ``scalar/<name>`` at the next saved step (``sm_metric``: also in the
        ``sm_metrics`` collection)."""
        tensor_name = f"scalar/{name}"
        self._pending_scalars[tensor_name] = np.asarray(value, dtype=np.float64).reshape(())
        if sm_metric:
            self.collections.get(CollectionKeys.SM_METRICS).add_tensor_name(tensor_name)

    def save_tensor(
        self,
        tensor_name: str,
        tensor_value: object,
        collections_to_write: str | Iterable[str] = CollectionKeys.DEFAULT,
    ) -> None:
        """Save ``tensor_value`` as ``tensor_name`` in these collections, at the next step at
        which one of them is saved."""
        names = (
            [collections_to_write]
            if isinstance(collections_to_write, str)
            else list(collections_to_write)
        )
        for collection in names:
            self.collections.get(collection).add_tensor_name(tensor_name)
            self.plan.include(collection)
        self._pending_tensors[tensor_name] = host_copy(tensor_value)

    # ----- Keras's callbacks (never the batch ends: Keras keeps them asynchronous) -----

    @_guarded
    def on_train_begin(self, logs: Any = None) -> None:
        model = self._model
        self._tap(model, training=True)
        self.steps.begin_fit(self._iterations(), self._accumulation())
        self._begin_run(ModeKeys.TRAIN)

    @_guarded
    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        micro_batches = self._iterations()
        self.steps.begin_epoch(micro_batches)
        loss_tap = self._losses.get(id(self._model))
        if loss_tap is not None:
            loss_tap.align(micro_batches)

    @_guarded
    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        if batch > 0:
            self._save(self.steps.train_batches_done(batch))
        self._check_stop()
        self._before_training_batches(batch)

    @_guarded
    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._end_training_batches()

    @_guarded
    def on_train_end(self, logs: Any = None) -> None:
        self._end_training_batches()
        if self._gradients is not None:
            self._set_capture(False)
        self._end_run()
        self.steps.end_fit()
        if self._writer is not None:
            self._writer.flush()

    @_guarded
    def on_test_begin(self, logs: Any = None) -> None:
        self._end_training_batches()
        self._tap(self._model, training=False)
        self._begin_run(ModeKeys.EVAL)

    @_guarded
    def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
        if batch > 0:
            self._save(self.steps.batch_done(ModeKeys.EVAL))
        self.steps.batch_started()
        self._profile_step_start(ModeKeys.EVAL)

    @_guarded
    def on_test_end(self, logs: Any = None) -> None:
        self._save(self.steps.batch_done(ModeKeys.EVAL, last=True))
        self._end_run()

    @_guarded
    def on_predict_begin(self, logs: Any = None) -> None:
        self._begin_run(ModeKeys.PREDICT)

    @_guarded
    def on_predict_batch_begin(self, batch: int, logs: Any = None) -> None:
        if batch > 0:
            self._save(self.steps.batch_done(ModeKeys.PREDICT))
        self.steps.batch_started()
        self._profile_step_start(ModeKeys.PREDICT)

    @_guarded
    def on_predict_end(self, logs: Any = None) -> None:
        self._save(self.steps.batch_done(ModeKeys.PREDICT, last=True))
        self._end_run()

    # ----- the training's batches -----

    def _begin_run(self, mode: ModeKeys) -> None:
        self.steps.begin_run(mode)
        if self.plan.is_stale():
            self.plan.prepare(strict=self.strict)

    def _end_run(self) -> None:
        self.steps.end_run()
        if self.profiler is not None:
            self.profiler.run_ended()

    def _before_training_batches(self, batch: int) -> None:
        """Copy the gradients of the coming batches if a step among them saves them."""
        coming = self.steps.coming_train_steps(self._steps_per_execution())
        if self._gradients is not None:
            wanted = any(self._saves_gradients(step) for step in coming)
            self._set_capture(wanted)
        self._profile_step_start(ModeKeys.TRAIN)

    def _end_training_batches(self) -> None:
        """The epoch's training batches ended (its validation or its end): save the last."""
        if self.steps.training_open:
            self._save(self.steps.train_batches_done(None, self._iterations()))

    def _saves_gradients(self, step: int) -> bool:
        due = self.plan.due(ModeKeys.TRAIN, step)
        return bool(due) and self.plan.holds_any(self._gradient_names(), due)

    def _set_capture(self, on: bool) -> None:
        tap = self._gradients
        if tap is None or tap.capture == on:
            return
        self._sync()
        tap.set_capture(on)

    def _check_stop(self) -> None:
        request = self.stop_watch.check()
        if request is not None:
            log.warning("trainprobe: stopping the training: %s", request.explain())
            self._model.stop_training = True

    def _profile_step_start(self, mode: ModeKeys) -> None:
        if self.profiler is not None:
            self.profiler.step_started(mode, self.steps.step + 1, self.steps.mode_step(mode) + 1)

    # ----- the taps -----

    def _tap(self, model: Any, *, training: bool) -> None:
        """Install the loss tap (and, training, the gradient tap) into the model's step."""
        if self._failed or self.dry_run:
            return
        remake = False
        if id(model) not in self._losses and getattr(model, "_loss_tracker", None) is not None:
            self._losses[id(model)] = LossTap(model, self._accumulation(model))
            remake = True
        optimizer = getattr(model, "optimizer", None)
        if training and optimizer is not None and self._gradients is None:
            self.optimizer = optimizer
            if self.plan.is_stale():
                self.plan.prepare(strict=self.strict)
            if self._wants_gradients():
                self._gradients = GradientTap(model, optimizer, self.backend)
                remake = True
            self._name_optimizer_variables()
        if remake:
            # Keras made its step functions before calling back: make them again, with the taps.
            model.train_function = model.test_function = None
            if training:
                model.make_train_function(force=True)
            else:
                model.make_test_function(force=True)

    def _wants_gradients(self) -> bool:
        """Whether any saved collection may hold a gradient at some step."""
        names = self._gradient_names()
        return any(c.matches(name) for c in self.plan.saved for name in names) or any(
            c.name == CollectionKeys.ALL for c in self.plan.saved
        )

    def _gradient_names(self) -> list[str]:
        return [
            naming.gradient_name(name)
            for name, _, variable in naming.model_variables(self._model)
            if variable.trainable
        ]

    def _name_optimizer_variables(self) -> None:
        collection = self.collections.get(CollectionKeys.OPTIMIZER_VARIABLES)
        for variable in self._optimizer_variables():
            collection.add_tensor_name(naming.optimizer_variable_name(variable))

    def _optimizer_variables(self) -> list[Any]:
        taps = set()
        if self._gradients is not None:
            taps = {id(v) for v in self._gradients.copies} | {id(self._gradients._flag)}
        return [v for v in getattr(self.optimizer, "variables", []) if id(v) not in taps]

    # ----- reading the training's state -----

    def _sync(self) -> None:
        """Bring JAX's state back into the model's variables (a no-op on other backends)."""
        model = self._model
        if self.backend == "jax" and hasattr(model, "jax_state_sync"):
            model.jax_state_sync()

    def _iterations(self) -> int:
        """The optimizer's count of micro-batches (its ``iterations`` times the accumulation),
        read where the state is synced."""
        optimizer = getattr(self._model, "optimizer", None)
        counter = getattr(optimizer, "_iterations", None)
        if counter is None:
            return 0
        self._sync()
        return int(np.asarray(keras.ops.convert_to_numpy(counter.value)))

    def _accumulation(self, model: Any = None) -> int:
        optimizer = getattr(model or self._model, "optimizer", None)
        return int(getattr(optimizer, "gradient_accumulation_steps", None) or 1)

    def _steps_per_execution(self) -> int:
        return int(getattr(self._model, "steps_per_execution", 1) or 1)

    # ----- saving a step -----

    def _save(self, point: Point | None) -> None:
        """Save what is due at a step that has just ended."""
        if self.profiler is not None:
            self.profiler.step_ended()
        if point is None:
            return
        due = 0
        for mode_step in range(max(point.first, point.mode_step - 63), point.mode_step + 1):
            due |= self.plan.due(point.mode, mode_step)
        if point.last and point.mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            due |= self._mask_of(_AT_THE_END)
        if not self._writes():
            return
        if not due:
            if self._pending_scalars and point.last:
                due = self._mask_of((CollectionKeys.SM_METRICS,))
            if not due:
                return
        if self.dry_run:
            names = ", ".join(c.name for c in self.plan.collections_in(due))
            log.info("trainprobe dry run: step %d would save %s", point.step, names)
            return
        self._sync()
        scalars, self._pending_scalars = self._pending_scalars, {}
        sent = self._send(point, due, self._values(point, due))
        sent = self._send_scalars(point, scalars) or sent
        if sent:
            writer = self._ensure_writer()
            writer.submit(EndStep(point.step))
            if not self._collections_written:
                self._collections_written = True
                self._write_collections()
        self._write_overhead_if_due()

    def _mask_of(self, names: Iterable[str]) -> int:
        wanted = set(names)
        return sum(1 << i for i, c in enumerate(self.plan.saved) if c.name in wanted)

    def _values(self, point: Point, due: int) -> list[tuple[str, np.ndarray]]:
        """The values of the tensors the due collections may hold, as host copies."""
        model = self._model
        found: list[tuple[str, np.ndarray]] = []
        if point.mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            found += self._loss_values(model, point)
        weights = list(naming.model_variables(model))
        if self.plan.holds_any([name for name, _, _ in weights], due):
            found += [(name, host_copy(variable)) for name, _, variable in weights]
        tap = self._gradients
        if point.mode is ModeKeys.TRAIN and tap is not None and tap.capture:
            by_variable = {id(v): copy for v, copy in zip(tap.variables, tap.copies, strict=True)}
            found += [
                (naming.gradient_name(name), host_copy(by_variable[id(variable)]))
                for name, _, variable in weights
                if id(variable) in by_variable
            ]
        if point.mode is ModeKeys.TRAIN and self.optimizer is not None:
            variables = self._optimizer_variables()
            names = [naming.optimizer_variable_name(v) for v in variables]
            if self.plan.holds_any(names, due):
                found += [(n, host_copy(v)) for n, v in zip(names, variables, strict=True)]
        tensors, self._pending_tensors = self._pending_tensors, {}
        return found + list(tensors.items())

    def _loss_values(self, model: Any, point: Point) -> list[tuple[str, np.ndarray]]:
        found: list[tuple[str, np.ndarray]] = []
        tap = self._losses.get(id(model))
        if tap is not None:
            last, total, count = (host_copy(v) for v in tap.variables)
            accumulated = point.mode is ModeKeys.TRAIN and self._accumulation() > 1
            loss = tap.loss_of(float(last), float(total), int(count), accumulated)
            found.append((naming.BATCH_LOSS, np.asarray(loss, dtype=np.float32)))
        for key, value in model.get_metrics_result().items():
            array = host_copy(value)
            if array.size == 1:
                found.append((str(key), array.reshape(())))
        return found

    def _send(self, point: Point, due: int, values: list[tuple[str, np.ndarray]]) -> bool:
        writer = self._ensure_writer()
        export = writer.tensorboard is not None
        wall_time = time.time()
        sent = False
        for name, value in values:
            plan = self.plan.what_to_save(name, due)
            if not plan.anything:
                continue
            summary = plan.summary if export else None
            if plan.raw or summary is not None:
                writer.submit(
                    TensorRecord(
                        point.step,
                        name,
                        value,
                        point.mode,
                        point.mode_step,
                        wall_time,
                        summary=summary,
                        save_raw=plan.raw,
                    )
                )
            if plan.shape:
                writer.submit(
                    ShapeRecord(point.step, name, tuple(value.shape), point.mode, point.mode_step)
                )
            for op, of_abs in plan.reductions:
                writer.submit(
                    TensorRecord(
                        point.step,
                        reduction_tensor_name(op, name, of_abs),
                        Reduction(value, op, of_abs),
                        point.mode,
                        point.mode_step,
                        wall_time,
                    )
                )
            sent = True
        return sent

    def _send_scalars(self, point: Point, scalars: dict[str, np.ndarray]) -> bool:
        """``save_scalar`` values: written at the next saved step, whatever its collections."""
        writer = self._ensure_writer()
        wall_time = time.time()
        for name, value in scalars.items():
            writer.submit(
                TensorRecord(point.step, name, value, point.mode, point.mode_step, wall_time)
            )
        return bool(scalars)

    # ----- the writer -----

    @property
    def worker(self) -> str:
        """This process's worker name (``worker_0``: one Keras process writes)."""
        return "worker_0"

    def _writes(self) -> bool:
        return True

    def _ensure_writer(self) -> WriterThread:
        if self._writer is None:
            export = TensorBoardExport(self.tensorboard_dir) if self.tensorboard_dir else None
            self._writer = WriterThread(
                self.out_dir, self.worker, on_error=self._on_writer_error, tensorboard=export
            )
        return self._writer

    def _write_collections(self) -> None:
        self._ensure_writer().submit(CollectionsJob(self.collections.to_json_dict(), 1))

    def _write_overhead_if_due(self) -> None:
        self.overhead.add(self.steps.step, self._spent)
        self._spent = 0.0
        if not self._overhead_file.reserved:
            self._overhead_file.reserved = True
            reserve = functools.partial(self._overhead_file.reserve, self.worker)
            self._ensure_writer().submit(SideJob(reserve))
        now = time.monotonic()
        if now < self._overhead_due_at or not self._overhead_file.enabled:
            return
        self._overhead_due_at = now + OVERHEAD_WRITE_SECONDS
        write = functools.partial(self._overhead_file.write, self.worker)
        self._ensure_writer().submit(SideJob(write))

    @property
    def spent_seconds(self) -> float:
        """The time the hook has taken from the training's thread so far."""
        return self.overhead.total_seconds + self._spent

    def _bytes_written(self) -> int:
        return self._writer.bytes_written if self._writer is not None else 0

    def _blocked(self) -> float:
        return self._writer.blocked_seconds if self._writer is not None else 0.0

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
        if self._writer is not None:
            self.overhead.saving_stopped(self.steps.step, error)

    def _on_writer_error(self, error: BaseException) -> None:
        if not self.strict:
            self._fail(error)

    def _profiler_failed(self, error: BaseException) -> None:
        if self.strict:
            raise error

    def close(self) -> None:
        """Write the collections file and ``training_job_end.ts``, and stop the writer."""
        if self._closed:
            return
        self._closed = True
        if self.profiler is not None:
            self.profiler.close()
        if self.dry_run:
            return
        self.overhead.add(self.steps.step, self._spent)
        self._spent = 0.0
        writer = self._ensure_writer()
        self._write_collections()
        writer.write_training_end()
        writer.close()
        self._overhead_file.write(self.worker)
        if self.strict and writer.error is not None:
            raise writer.error

    def __repr__(self) -> str:
        return (
            f"<trainprobe.keras.Hook out_dir={self.out_dir!r} step={self.steps.step} "
            f"collections={[c.name for c in self.plan.saved]}>"
        )
