"""The XGBoost hook: an ``xgboost.callback.TrainingCallback`` that saves each boosting round.

Usage is smdebug's::

    hook = Hook(out_dir, hyperparameters=params, validation_data=dval)
    xgb.train(params, dtrain, evals=[(dtrain, "train"), (dval, "validation")], callbacks=[hook])
    # or XGBClassifier(callbacks=[hook]).fit(X, y, eval_set=[(X_val, y_val)])

A step is a boosting round (the first is step 0), all in GLOBAL mode. By default the hook saves
the ``metrics`` collection every 10 rounds; ``include_collections`` adds others
(``hyperparameters``, ``predictions``, ``labels``, ``feature_importance``, ``average_shap``,
``full_shap``, ``trees``, ``losses``), see ``round_tensors`` for the names. Predictions and
labels need ``validation_data``; SHAP values need ``train_data`` (a DMatrix, or a
``(path, "csv"|"libsvm")`` pair). A round's values are computed only for the collections due
at it, and handed to the writer thread, which encodes and writes them; ``reduction_config`` is
accepted and ignored, as in smdebug (everything is saved whole).

A rule's StopTraining request ends the boosting (the callback returns True) at the next round.
Failures: an error inside the hook is logged once, saving stops, and the training goes on (with
``strict=True`` or ``TRAINPROBE_STRICT=1`` it is raised instead).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import xgboost as xgb

from trainprobe import settings
from trainprobe.capture.at_exit import close_at_exit
from trainprobe.capture.collections import (
    XGBOOST_COLLECTIONS,
    CollectionAccess,
    CollectionKeys,
)
from trainprobe.capture.collections import CollectionSet as _CollectionSet
from trainprobe.capture.hook_arguments import (
    check_include_workers,
    output_directory,
    tensorboard_directory,
)
from trainprobe.capture.hook_config_file import read_hook_config
from trainprobe.capture.overhead import HookOverhead, OverheadFile
from trainprobe.capture.reduction_config import ReductionConfig
from trainprobe.capture.save_config import SaveConfig, SaveConfigMode
from trainprobe.capture.save_plan import SavePlan
from trainprobe.capture.stop_request import StopRequestWatch
from trainprobe.capture.tensorboard_export import TensorBoardExport
from trainprobe.capture.writer_thread import CollectionsJob, EndStep, TensorRecord, WriterThread
from trainprobe.capture.xgboost import round_tensors
from trainprobe.capture.xgboost.data import dmatrix_of
from trainprobe.config.errors import ConfigError
from trainprobe.storage.modes import ModeKeys

__all__ = ["DEFAULT_SAVE_INTERVAL", "Hook", "get_hook"]

log = logging.getLogger("trainprobe")

DEFAULT_SAVE_INTERVAL = 10
"""Rounds between saves when nothing else is said (smdebug's XGBoost default)."""

ALWAYS_SAVED = (CollectionKeys.METRICS,)
_RAW = ReductionConfig(save_raw_tensor=True)

# The collections each group of a round's tensors can fall into; another collection due (all,
# default, one of the user's) may hold any of them.
_GROUPS = {
    CollectionKeys.METRICS: "metrics",
    CollectionKeys.LOSSES: "metrics",
    CollectionKeys.HYPERPARAMETERS: "hyperparameters",
    CollectionKeys.PREDICTIONS: "predictions",
    CollectionKeys.LABELS: "labels",
    CollectionKeys.FEATURE_IMPORTANCE: "feature_importance",
    CollectionKeys.TREES: "trees",
    CollectionKeys.FULL_SHAP: "full_shap",
    CollectionKeys.AVERAGE_SHAP: "average_shap",
}
_EVERY_GROUP = frozenset(_GROUPS.values())

_singleton: Hook | None = None


def get_hook(json_config_path: str | None = None, create_if_not_exists: bool = True) -> Hook | None:
    """The hook of this process, or one made from the hook configuration file (as smdebug's
    ``smdebug.xgboost.get_hook``); None when there is neither."""
    if _singleton is None and create_if_not_exists and settings.USE_SMDEBUG.get():
        try:
            Hook.create_from_json_file(json_config_path)
        except FileNotFoundError:
            return None
    return _singleton


def _strict_from_environment() -> bool:
    return settings.STRICT.get()


class Hook(CollectionAccess, xgb.callback.TrainingCallback):
    """Saves XGBoost's metrics, predictions, importances, SHAP values and trees by round."""

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
        hyperparameters: Mapping[str, Any] | None = None,
        train_data: xgb.DMatrix | tuple[str, str] | None = None,
        validation_data: xgb.DMatrix | tuple[str, str] | None = None,
        *,
        strict: bool | None = None,
    ) -> None:
        global _singleton
        super().__init__()
        self.out_dir = output_directory(out_dir)
        check_include_workers(include_workers)
        if hyperparameters is not None and not isinstance(hyperparameters, Mapping):
            raise ConfigError("hyperparameters", hyperparameters, "a dict of name to value")
        if reduction_config is not None:
            log.warning(
                "trainprobe: the XGBoost hook saves whole values; reduction_config is ignored"
            )
        self.strict = _strict_from_environment() if strict is None else bool(strict)
        self.dry_run = bool(dry_run)
        self.include_workers = include_workers
        self.hyperparameters = dict(hyperparameters) if hyperparameters is not None else None
        self.train_data = dmatrix_of(train_data, "train_data")
        self.validation_data = dmatrix_of(validation_data, "validation_data")
        self.tensorboard_dir = tensorboard_directory(
            export_tensorboard, tensorboard_dir, self.out_dir
        )
        self.export_tensorboard = self.tensorboard_dir is not None
        self.save_config = SaveConfig.parse(
            save_config if save_config is not None else SaveConfigMode(DEFAULT_SAVE_INTERVAL)
        )
        self.collections = _CollectionSet(XGBOOST_COLLECTIONS)
        included = self.collections.select(include_collections, include_regex, save_all)
        self.plan = SavePlan(
            self.collections, included, self.save_config, _RAW, always_saved=ALWAYS_SAVED
        )
        self.stop_watch = StopRequestWatch(self.out_dir)
        self.step = -1
        self._step_offset = 0
        self._writer: WriterThread | None = None
        self._worker: tuple[int, int] | None = None
        self._collections_written = False
        self._warned: set[str] = set()
        self._failed = False
        self._closed = False
        self.overhead = HookOverhead(_bytes=self._bytes_written, blocked_seconds=self._blocked)
        self._overhead_file = OverheadFile(self.out_dir, self.overhead)
        _singleton = self
        close_at_exit(self, lambda hook: hook.close(), "the XGBoost hook")

    @classmethod
    def create_from_json_file(cls, json_file_path: str | None = None) -> Hook:
        """A hook configured by a ``DebugHookConfig`` JSON file (found as the PyTorch hook finds
        it); every 10 rounds unless the file says otherwise. FileNotFoundError when there is none.
        """
        arguments = read_hook_config(json_file_path, default_save_interval=DEFAULT_SAVE_INTERVAL)
        kwargs = arguments.hook_kwargs()
        kwargs["reduction_config"] = None
        hook = cls(**kwargs)
        for collection_settings in arguments.collections:
            collection_settings.apply(hook.collections)
        return hook

    hook_from_config = create_from_json_file

    # ----- XGBoost's callback -----

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        """Save what is due at this round; True (stop boosting) when a rule asked to stop."""
        if not (self._failed or self._closed):
            started = time.perf_counter()
            try:
                self._save_round(model, epoch, evals_log or {})
            except Exception as error:
                self._fail(error)
            self.overhead.add(self.step, time.perf_counter() - started)
        request = self.stop_watch.check()
        if request is not None:
            log.warning(
                "trainprobe: stopping the boosting at round %d: %s", epoch, request.explain()
            )
            return True
        return False

    def after_training(self, model: Any) -> Any:
        """Wait until this training's rounds are on disk; the hook stays usable for another."""
        if self._writer is not None and not self._failed:
            self._writer.flush()
        return model

    # ----- one round -----

    def _save_round(self, model: xgb.Booster, epoch: int, evals_log: Mapping[str, Any]) -> None:
        if epoch + self._step_offset <= self.step:
            # The same hook in a second training: its rounds follow the first one's.
            self._step_offset = self.step + 1 - epoch
        self.step = epoch + self._step_offset
        if self.plan.is_stale():
            self.plan.prepare(strict=self.strict)
        if not self._writes():
            return
        due = self.plan.due(ModeKeys.GLOBAL, self.step)
        if not due:
            return
        groups = self._groups(due)
        if self.dry_run:
            names = ", ".join(c.name for c in self.plan.collections_in(due))
            log.info("trainprobe dry run: round %d would save %s", self.step, names)
            return
        writer = self._ensure_writer()
        export = writer.tensorboard is not None
        wall_time = time.time()
        sent = False
        for name, value in self._round_tensors(model, epoch, evals_log, groups):
            plan = self.plan.what_to_save(name, due)
            if not plan.raw:
                continue
            record = TensorRecord(
                self.step,
                name,
                value,
                ModeKeys.GLOBAL,
                self.step,
                wall_time,
                summary=plan.summary if export else None,
            )
            writer.submit(record)
            sent = True
        if sent:
            writer.submit(EndStep(self.step))
            if not self._collections_written:
                self._collections_written = True
                self._write_collections()

    def _groups(self, due: int) -> frozenset[str]:
        groups: set[str] = set()
        for collection in self.plan.collections_in(due):
            group = _GROUPS.get(collection.name)
            if group is None:
                return _EVERY_GROUP
            groups.add(group)
        return frozenset(groups)

    def _round_tensors(
        self, model: xgb.Booster, epoch: int, evals_log: Mapping[str, Any], groups: frozenset[str]
    ) -> Iterator[tuple[str, np.ndarray]]:
        if "metrics" in groups:
            yield from round_tensors.metric_tensors(evals_log)
        if "hyperparameters" in groups and self._have("hyperparameters", self.hyperparameters):
            yield from round_tensors.hyperparameter_tensors(self.hyperparameters or {})
        validation = self.validation_data
        if "predictions" in groups and self._have("validation_data", validation):
            assert validation is not None
            yield "predictions", np.asarray(model.predict(validation))
        if "labels" in groups and self._have("validation_data", validation):
            assert validation is not None
            yield "labels", np.asarray(validation.get_label())
        trees = groups & {"feature_importance", "trees"}
        if trees and self._is_tree_model(model):
            if "feature_importance" in groups:
                yield from round_tensors.feature_importances(model)
            if "trees" in groups:
                yield from round_tensors.tree_tensors(model, epoch)
        shap = groups & {"full_shap", "average_shap"}
        train = self.train_data
        if shap and self._have("train_data", train):
            assert train is not None
            yield from round_tensors.shap_tensors(
                model,
                train,
                full="full_shap" in shap,
                average="average_shap" in shap,
            )

    def _have(self, argument: str, value: object) -> bool:
        """Whether ``value`` was given; says once what is missing when it was not."""
        if value:
            return True
        if argument not in self._warned:
            self._warned.add(argument)
            log.warning("trainprobe: give the XGBoost hook %s to save what needs it", argument)
        return False

    def _is_tree_model(self, model: xgb.Booster) -> bool:
        kind = round_tensors.booster_kind(model)
        if kind in round_tensors.TREE_BOOSTERS:
            return True
        if "booster" not in self._warned:
            self._warned.add("booster")
            log.warning("trainprobe: a %s model has no trees nor feature importance", kind)
        return False

    # ----- who writes, and the writer -----

    @property
    def worker(self) -> str:
        """This process's worker name, ``worker_<rank>`` (XGBoost's collective rank)."""
        return f"worker_{self._rank_and_size()[0]}"

    def _rank_and_size(self) -> tuple[int, int]:
        if self._worker is None:
            try:
                self._worker = (xgb.collective.get_rank(), xgb.collective.get_world_size())
            except Exception:
                self._worker = (0, 1)
        return self._worker

    def _writes(self) -> bool:
        return self.include_workers == "all" or self._rank_and_size()[0] == 0

    def _ensure_writer(self) -> WriterThread:
        if self._writer is None:
            export = None
            if self.tensorboard_dir is not None and self._rank_and_size()[0] == 0:
                export = TensorBoardExport(self.tensorboard_dir)
            self._writer = WriterThread(
                self.out_dir, self.worker, on_error=self._on_writer_error, tensorboard=export
            )
        return self._writer

    def _write_collections(self) -> None:
        count = self._rank_and_size()[1] if self.include_workers == "all" else 1
        self._ensure_writer().submit(CollectionsJob(self.collections.to_json_dict(), count))

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
            "trainprobe: saving the XGBoost rounds failed and stops for the rest of this run "
            "(%s: %s). Training continues; what was already saved under %s is intact. "
            "Pass strict=True to the hook or set %s=1 to stop the training on such errors.",
            type(error).__name__,
            error,
            self.out_dir,
            settings.STRICT.name,
        )

    def _on_writer_error(self, error: BaseException) -> None:
        if not self.strict:
            self._fail(error)

    def close(self) -> None:
        """Write the collections file and ``training_job_end.ts``, and stop the writer."""
        if self._closed:
            return
        self._closed = True
        if self.dry_run or not self._writes():
            return
        writer = self._ensure_writer()
        self._write_collections()
        if self._rank_and_size()[0] == 0:
            writer.write_training_end()
        writer.close()
        # The writer thread has stopped: the count of bytes is final.
        self._overhead_file.write(self.worker)
        if self.strict and writer.error is not None:
            raise writer.error

    def __repr__(self) -> str:
        return (
            f"<trainprobe.xgboost.Hook out_dir={self.out_dir!r} step={self.step} "
            f"collections={[c.name for c in self.plan.saved]}>"
        )
