"""A trial: the tensors a training job saved, read back by step, mode and worker.

``create_trial(path)`` reads smdebug-format output, whether written by trainprobe's hook or by
smdebug's. It follows a job in progress: each query that needs newer data re-lists the index
files and reads only the new ones. Once ``training_job_end.ts`` appears, the trial knows every
step it will ever have (``loaded_all_steps``) and stops looking. Tensor records are read only
when a value is asked for, one ranged read each.

Nothing waits forever: a location with no output yet is given ``timeout`` seconds (10 by
default) to show a collections file, then MissingCollectionFiles says what was found.

The training record that trainprobe's PyTorch hook keeps (every TRAIN step's loss, learning rate
and gradient norm, ``storage.training_record``) is read as three more scalars,
``trainprobe/loss``, ``trainprobe/learning_rate`` and ``trainprobe/gradient_norm``, with a value
at every recorded step (``analysis.recorded_tensor``); they belong to no collection. It is read
from the hook's chunks when first asked for, and again after a refresh.

Damage costs only what is damaged: an index or collections file that cannot be read (truncated,
not JSON, nested too deeply, naming a file outside the trial) is skipped with one warning, and
its step is missing from that worker; a record that fails its checksum, or lies in a truncated
event file, raises TensorRecordDamaged for that value (warned once per file), and the others
read. Records are checked against the checksums their index gives; output without them
(smdebug's, or an older trainprobe's) is read unverified, as noted once in the log.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable, Sequence

import numpy as np

from trainprobe.analysis.exceptions import (
    MissingCollectionFiles,
    NoMoreData,
    StepNotYetAvailable,
    StepUnavailable,
    TensorRecordDamaged,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from trainprobe.analysis.kept_values import KeptValues
from trainprobe.analysis.module_types import ModuleTypeIndex
from trainprobe.analysis.read_log import ReadLog
from trainprobe.analysis.recorded_tensor import RecordedTensor
from trainprobe.analysis.saved_collection import SavedCollection
from trainprobe.analysis.steps import StepCatalog, StepState
from trainprobe.analysis.tensor import RecordRef, Tensor
from trainprobe.config.errors import ConfigError, closest
from trainprobe.storage import files, locations, step_reader
from trainprobe.storage.index_file import StepIndex
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.nonfinite_file import NonFiniteOrigin, read_nonfinite_origin
from trainprobe.storage.reduction_names import parse_reduction_tensor_name
from trainprobe.storage.tensor_event import TensorEvent
from trainprobe.storage.training_end import training_has_ended
from trainprobe.storage.training_record import CHARTED, TrainingRecord
from trainprobe.storage.written_scalars import read_training_record

__all__ = ["DEFAULT_TIMEOUT", "Trial", "create_trial"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
_POLL_INTERVAL = 0.2


class Trial:
    """The saved tensors of one training job (or of one in progress). Use ``create_trial``."""

    def __init__(
        self,
        path: str,
        name: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        range_steps: tuple[int | None, int | None] | None = None,
    ) -> None:
        self.path = path.rstrip("/") or path
        self.name = name if name is not None else os.path.basename(self.path)
        self.timeout = timeout
        self.range_steps = range_steps
        self.dynamic_refresh = True
        self.loaded_all_steps = False
        self._catalog = StepCatalog()
        self._tensors: dict[str, Tensor] = {}
        self._step_tensors: dict[int, set[str]] = {}
        self._mode_tensors: dict[ModeKeys, set[str]] = {}
        self._workers: set[str] = set()
        self._collections: dict[str, SavedCollection] = {}
        self._read_index_files: set[str] = set()
        self._last_step_of: dict[str, int] = {}
        self._read_collections_files: set[str] = set()
        self._warned: set[str] = set()
        self._reader = files.RangeReader(max_open=128)
        self.read_log: ReadLog | None = None
        self._kept: KeptValues | None = None
        self._module_types = ModuleTypeIndex(self.path)
        self._record: TrainingRecord | None = None
        self._record_stale = True
        self._wait_for_collections()
        self.refresh_data()

    def __repr__(self) -> str:
        count = len(self._catalog.steps(incomplete=True))
        return f"<Trial {self.name!r} at {self.path!r}: {count} steps>"

    # Loading -------------------------------------------------------------------------------

    def _wait_for_collections(self) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            ended = training_has_ended(self.path)
            if self._load_collections():
                return
            if ended:
                raise MissingCollectionFiles(
                    f"The training job writing {self.path} has ended without a collections "
                    "file: it saved no tensors."
                )
            if time.monotonic() >= deadline:
                found = (
                    "the directory does not exist"
                    if not files.exists(self.path)
                    else "it holds no collections file (collections/000000000/*_collections.json)"
                )
                raise MissingCollectionFiles(
                    f"No tensor output at {self.path} after waiting {self.timeout:g} s: {found}. "
                    "Check the path, or pass a longer timeout if the job is still starting."
                )
            time.sleep(_POLL_INTERVAL)

    def _load_collections(self) -> bool:
        """Read collections files not read yet; whether any collections file exists."""
        names = step_reader.list_collections_files(self.path)
        for name in names:
            if name in self._read_collections_files:
                continue
            try:
                content = step_reader.read_collections_file(self.path, name)
            except (ValueError, RecursionError) as error:
                self._read_collections_files.add(name)
                self._warn(name, f"cannot read {self.path}/{name}, skipped: {error}")
                continue
            except OSError as error:
                self._warn(name, f"cannot read {self.path}/{name} yet: {error}")
                continue
            self._read_collections_files.add(name)
            self._workers.add(content.worker)
            self._catalog.set_num_workers(max(self._catalog.num_workers, content.num_workers))
            for key, entry in content.collections.items():
                collection = SavedCollection.from_json(key, entry)
                known = self._collections.get(collection.name)
                self._collections[collection.name] = (
                    collection if known is None else known.merged(collection)
                )
        return bool(names)

    def _in_range(self, step: int) -> bool:
        if self.range_steps is None:
            return True
        start, end = self.range_steps
        return (start is None or step >= start) and (end is None or step < end)

    def refresh_data(self) -> None:
        """Read every index file written since the last refresh."""
        ended = training_has_ended(self.path)
        self._load_collections()
        wanted = []
        for name in step_reader.list_index_files(self.path, self._listed_from()):
            if name in self._read_index_files:
                continue
            parsed = locations.parse_index_file_name(name)
            if parsed is not None:
                step, worker = parsed
                self._last_step_of[worker] = max(step, self._last_step_of.get(worker, step))
            if parsed is None or not self._in_range(parsed[0]):
                self._read_index_files.add(name)
                continue
            wanted.append(name)
        for name, index in step_reader.read_step_indexes(self.path, wanted):
            if isinstance(index, ValueError):
                self._read_index_files.add(name)
                step, worker = locations.parse_index_file_name(name) or (-1, "?")
                self._warn(
                    name,
                    f"the index file {self.path}/{name} is damaged, so step {step} of {worker} "
                    f"cannot be read (the other steps can): {index}",
                )
                continue
            if isinstance(index, OSError):
                self._warn(name, f"cannot read the index file {self.path}/{name} yet: {index}")
                continue
            self._add_index(index)
            self._read_index_files.add(name)
        if ended:
            self._catalog.mark_ended()
            self.loaded_all_steps = True
        self._record_stale = True

    def _training_record(self) -> TrainingRecord | None:
        """The training record kept beside the steps (read again after a refresh), within
        ``range_steps``; None when there is none."""
        if self._record_stale:
            self._record_stale = False
            try:
                record = read_training_record(self.path)
            except (OSError, ValueError) as error:
                self._warn("record", f"cannot read the training record of {self.path}: {error}")
                record = None
            if record is not None and self.range_steps is not None:
                kept = np.array([self._in_range(int(step)) for step in record.steps], dtype=bool)
                record = TrainingRecord(
                    record.mode,
                    record.steps[kept],
                    record.mode_steps[kept],
                    {name: values[kept] for name, values in record.values.items()},
                )
            self._record = record if record is not None and len(record) else None
        return self._record

    def _recorded_names(self, mode: ModeKeys) -> set[str]:
        """The training record's scalars, when it holds steps of ``mode`` (any, for GLOBAL)."""
        record = self._training_record()
        if record is None or (mode != ModeKeys.GLOBAL and mode.name != record.mode):
            return set()
        return set(CHARTED)

    def _listed_from(self) -> int | None:
        """The step from which index files can still appear or matter: each worker writes its
        steps in order, so nothing new comes before the step the slowest worker last wrote
        (None until every worker has written one), and none before ``range_steps`` matters."""
        first = None if self.range_steps is None else self.range_steps[0]
        known = self._last_step_of
        if not known or len(known) < max(self._catalog.num_workers, len(self._workers)):
            return first
        return max(min(known.values()), first or 0)

    def maybe_refresh(self) -> None:
        """Refresh, unless the job has ended (all is loaded) or refreshing is turned off."""
        if self.loaded_all_steps or not self.dynamic_refresh:
            return
        self.refresh_data()

    def _tensor_for(self, name: str) -> Tensor:
        tensor = self._tensors.get(name)
        if tensor is None:
            tensor = self._tensors[name] = Tensor(name, self)
        return tensor

    def _add_index(self, index: StepIndex) -> None:
        step, worker = index.step, index.worker
        self._catalog.add(step, worker, index.mode, index.mode_step)
        self._workers.add(worker)
        names = self._step_tensors.setdefault(step, set())
        event_file = index.event_file or locations.event_file(step, worker)
        if index.tensors and index.tensors[0].checksum is None:
            self._warn(
                "unverified",
                f"the records of {self.path} carry no checksums (written by smdebug or an older "
                "trainprobe): they are read without verification",
                level=logging.INFO,
            )
        shards = {shard.name: shard for shard in index.shards}
        for location in index.tensors:
            ref = RecordRef(event_file, location.start, location.length, location.checksum)
            reduction = parse_reduction_tensor_name(location.name)
            if reduction is None:
                shard = shards.get(location.name) if shards else None
                self._tensor_for(location.name)._add_value(step, worker, ref, shard)
                names.add(location.name)
            else:
                tensor = self._tensor_for(reduction.tensor_name)
                tensor._add_reduction(step, worker, reduction.op, reduction.abs, ref)
                names.add(reduction.tensor_name)
        for shape in index.shapes:
            self._tensor_for(shape.name)._add_shape(step, worker, shape.shape, shape.original_name)
            names.add(shape.name)
        for shard in index.shards:  # a piece only fingerprinted, not saved, still has its place
            if shard.name in self._tensors:
                self._tensors[shard.name]._add_place(step, worker, shard)
        self._mode_tensors.setdefault(index.mode, set()).update(names)

    def _warn(self, key: str, message: str, *, level: int = logging.WARNING) -> None:
        """Log ``message`` the first time something is wrong with ``key`` (a file)."""
        if key not in self._warned:
            self._warned.add(key)
            log.log(level, "trainprobe: %s", message)

    def _damaged(
        self, name: str, step: int, mode: ModeKeys, event_file: str, error: Exception
    ) -> TensorRecordDamaged:
        path = f"{self.path}/{event_file}"
        reason = str(error) or type(error).__name__
        self._warn(event_file, f"{path} is damaged ({reason}); the tensors in it cannot be read")
        return TensorRecordDamaged(name, step, mode, path, reason)

    def keep_values(self, max_bytes: int) -> None:
        """From now on, keep the values read (the most recent, up to ``max_bytes``) and give
        every later reader of a record the same array, read-only: for several readers of this
        trial in one process, such as rules evaluated together. Each record is still checked
        against its checksum when it is read from disk."""
        self._kept = KeptValues(max_bytes)

    def _value(self, name: str, step: int, mode: ModeKeys, ref: RecordRef) -> np.ndarray:
        """The value in the record at ``ref`` (the hot path of ``Tensor.value``)."""
        if self.read_log is not None:
            self.read_log.read(name)
        kept = self._kept
        if kept is not None:
            value = kept.get(ref)
            if value is not None:
                return value
        try:
            value = step_reader.read_tensor_value(
                self.path, ref.event_file, ref.start, ref.length, self._reader, ref.checksum
            )
        except FileNotFoundError:
            value = self._read(name, step, mode, [ref])[0].value()
        except (ValueError, EOFError, MemoryError) as error:  # MemoryError: an absurd length
            raise self._damaged(name, step, mode, ref.event_file, error) from error
        return value if kept is None else kept.keep(ref, value)

    def _read(
        self, name: str, step: int, mode: ModeKeys, refs: Sequence[RecordRef]
    ) -> list[TensorEvent]:
        """Decode the records at ``refs``, in order, reading each event file once."""
        if self.read_log is not None and refs:
            self.read_log.read(name)
        by_file: dict[str, list[int]] = {}
        for position, ref in enumerate(refs):
            by_file.setdefault(ref.event_file, []).append(position)
        events: list[TensorEvent | None] = [None] * len(refs)
        for event_file, positions in by_file.items():
            wanted = [refs[p] for p in positions]
            for position, event in zip(
                positions, self._read_file(name, step, mode, event_file, wanted), strict=True
            ):
                events[position] = event
        return [event for event in events if event is not None]

    def _read_file(
        self, name: str, step: int, mode: ModeKeys, event_file: str, refs: list[RecordRef]
    ) -> list[TensorEvent]:
        # An index can name an event file not there yet when the output is being copied to
        # object storage; give it the trial's timeout, unless the job has ended.
        deadline = time.monotonic() + self.timeout
        ranges = [(ref.start, ref.length) for ref in refs]
        checksums = [ref.checksum for ref in refs]
        while True:
            try:
                return step_reader.read_tensor_records(
                    self.path, event_file, ranges, self._reader, checksums
                )
            except (ValueError, EOFError, MemoryError) as error:  # MemoryError: an absurd length
                raise self._damaged(name, step, mode, event_file, error) from error
            except FileNotFoundError:
                if self.loaded_all_steps or time.monotonic() >= deadline:
                    raise TensorUnavailableForStep(name, step, mode) from None
                time.sleep(_POLL_INTERVAL)
                if training_has_ended(self.path):
                    self.loaded_all_steps = True

    # Queries -------------------------------------------------------------------------------

    def tensor_names(
        self,
        show_prefixed_tensors: bool = False,
        *,
        step: int | None = None,
        mode: ModeKeys = ModeKeys.GLOBAL,
        regex: str | Iterable[str] | None = None,
        collection: str | SavedCollection | None = None,
    ) -> list[str]:
        """Names of the saved tensors, sorted; reductions are filed under their tensor.

        ``step`` (of ``mode``) keeps the tensors saved at that step; ``mode`` alone keeps
        those saved in that mode. The training record's scalars (``trainprobe/loss``...: in no
        collection, and no step's file holds them) are listed only where a ``regex`` without a
        ``step`` matches them: a script that reads every listed name at every saved step, as
        smdebug's users write, reads what it always did.
        ``regex`` (searched, unanchored) or ``collection`` (not both) narrow the list further;
        a collection named that the job did not save (nor ``collection()`` made) is a
        ConfigError naming those it saved.
        ``show_prefixed_tensors`` is accepted for smdebug compatibility and changes nothing.
        """
        if regex is not None and collection is not None:
            raise ConfigError("tensor_names", "regex and collection", "only one of the two")
        self.maybe_refresh()
        if step is not None:
            global_step = self._catalog.to_global(mode, step)
            names: set[str] = (
                set(self._step_tensors.get(global_step, ())) if global_step is not None else set()
            )
        elif mode == ModeKeys.GLOBAL:
            names = set(self._tensors)
        else:
            names = set(self._mode_tensors.get(mode, ()))
        if regex is not None and step is None:  # asked for: no step file holds them
            names |= self._recorded_names(mode)
        log = self.read_log
        if regex is not None:
            patterns = [regex] if isinstance(regex, str) else list(regex)
            names = {n for n in names if any(re.search(p, n) for p in patterns)}
            if log is not None:
                for pattern in patterns:
                    log.looked_for("pattern", pattern, any(re.search(pattern, n) for n in names))
        if isinstance(collection, str) and collection not in self._collections:
            # A rule asking by name for what the job did not save must hear it, not get [].
            allowed = "one of " + ", ".join(sorted(self._collections))
            suggestion = closest(collection, self._collections)
            raise ConfigError("collection", collection, allowed, suggestion=suggestion)
        if collection is not None:
            saved = self.collection(collection if isinstance(collection, str) else collection.name)
            names = {n for n in names if saved.matches(n)}
            if log is not None:
                log.looked_for("collection", saved.name, bool(names))
        return sorted(names)

    def values_at(self, step: int, names: Iterable[str]) -> dict[str, np.ndarray]:
        """The values of the tensors ``names`` saved whole at global ``step`` (by the first
        worker, in sorted order), reading each event file once: what a reader of many scalars
        by step needs. A tensor with no value there is left out, as is one whose record cannot
        be read (the trial logs it once)."""
        return self.values_at_steps([step], names).get(step, {})

    def values_at_steps(
        self, steps: Sequence[int], names: Iterable[str]
    ) -> dict[int, dict[str, np.ndarray]]:
        """``values_at`` for each of ``steps`` (those with a value), read together: each event
        file once, and the records of all of them decoded in one pass
        (``step_reader.read_values_of_files``), which is what makes reading every scalar of a
        long job quick."""
        names = list(names)
        wanted: list[tuple[int, str, list[tuple[str, RecordRef]]]] = []
        for step in steps:
            by_file: dict[str, list[tuple[str, RecordRef]]] = {}
            for name in names:
                tensor = self._tensors.get(name)
                workers = tensor._steps.get(step) if tensor is not None else None
                if not workers:
                    continue
                ref = workers[min(workers)].value
                if ref is not None:
                    by_file.setdefault(ref.event_file, []).append((name, ref))
            wanted += [(step, event_file, refs) for event_file, refs in by_file.items()]
        results = step_reader.read_values_of_files(
            self.path,
            [
                (
                    event_file,
                    [(ref.start, ref.length) for _, ref in refs],
                    [ref.checksum for _, ref in refs],
                )
                for _, event_file, refs in wanted
            ],
            self._reader,
        )
        found: dict[int, dict[str, np.ndarray]] = {}
        for (step, event_file, refs), result in zip(wanted, results, strict=True):
            if isinstance(result, FileNotFoundError):
                continue  # not there yet (being copied to object storage)
            if isinstance(result, OSError):
                raise result
            if isinstance(result, Exception):
                self._damaged(refs[0][0], step, ModeKeys.GLOBAL, event_file, result)
                continue
            values = found.setdefault(step, {})
            for (name, _), value in zip(refs, result, strict=True):
                values[name] = value
        return found

    def has_tensor(self, name: str) -> bool:
        """Whether tensor ``name`` has been saved (refreshing once if it is not known yet)."""
        if name not in self._tensors:
            self.maybe_refresh()
        found = name in self._tensors or (name in CHARTED and self._training_record() is not None)
        if self.read_log is not None:
            self.read_log.looked_for("tensor", name, found)
        return found

    def tensor(self, name: str) -> Tensor:
        """Tensor ``name``; raises TensorUnavailable when it was never saved."""
        if not self.has_tensor(name):
            raise TensorUnavailable(name)
        if name not in self._tensors:
            self._tensors[name] = RecordedTensor(name, self)
        return self._tensors[name]

    def steps(
        self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False
    ) -> list[int]:
        """Saved steps, sorted: global steps, or ``mode``'s own step numbers.

        Only complete steps (every worker has written them) unless ``show_incomplete_steps``.
        """
        self.maybe_refresh()
        return self._catalog.steps(mode, incomplete=show_incomplete_steps)

    def modes(self) -> list[ModeKeys]:
        """The modes steps were saved in (GLOBAL is not listed)."""
        return self._catalog.modes()

    def mode_modestep(self, global_step: int) -> tuple[ModeKeys | None, int | None]:
        """(mode, mode step) of a global step (a saved step, or one the training record
        holds); (None, None) when the step is not known."""
        found = self._catalog.mode_of(global_step)
        if found is None:
            self.maybe_refresh()
            found = self._catalog.mode_of(global_step)
        if found is None and (record := self._training_record()) is not None:
            at = int(np.searchsorted(record.steps, global_step))
            if at < len(record) and int(record.steps[at]) == global_step:
                found = (ModeKeys[record.mode], int(record.mode_steps[at]))
        return found if found is not None else (None, None)

    def mode(self, global_step: int) -> ModeKeys | None:
        """The mode of a global step, or None when it is not known."""
        return self.mode_modestep(global_step)[0]

    def mode_step(self, global_step: int) -> int | None:
        """The step number within its mode of a global step, or None when it is not known."""
        return self.mode_modestep(global_step)[1]

    def global_step(self, mode: ModeKeys, mode_step: int) -> int | None:
        """The global step of ``mode_step`` in ``mode``, or None when it is not known."""
        if mode == ModeKeys.GLOBAL:
            return mode_step
        found = self._catalog.to_global(mode, mode_step)
        if found is None:
            self.maybe_refresh()
            found = self._catalog.to_global(mode, mode_step)
        return found

    def workers(self) -> list[str]:
        """Every worker that wrote a collections file or a step, sorted."""
        self.maybe_refresh()
        return sorted(self._workers)

    @property
    def num_workers(self) -> int:
        """How many workers are expected to write each step (from the collections files)."""
        return self._catalog.num_workers

    @property
    def last_complete_step(self) -> int:
        """The latest global step every worker has written (-1 before any)."""
        return self._catalog.last_complete_step

    def collections(self) -> dict[str, SavedCollection]:
        """The job's collections, by name (merged over workers)."""
        return dict(self._collections)

    def collection(self, name: str) -> SavedCollection:
        """Collection ``name``. One the job did not save is made empty, as smdebug makes it
        (logged, with the names of those it saved), so that it can be extended."""
        found = self._collections.get(name)
        if found is None:
            suggestion = closest(name, self._collections)
            log.info(
                "trainprobe: the job saved no collection %r (it saved %s)%s; an empty one is made",
                name,
                ", ".join(sorted(self._collections)) or "none",
                f"; did you mean {suggestion!r}?" if suggestion else "",
            )
            found = self._collections[name] = SavedCollection(name)
        return found

    def module_type(self, name: str) -> str | None:
        """The class of a module the PyTorch hook registered (``"torch.nn.Tanh"``), by the
        module's name or by one of its tensors' (``"body.1_input_0"``); None when not recorded
        (output written by smdebug, or a tensor that is not a module's input or output)."""
        found = self._module_types.get(name, self.loaded_all_steps)
        return None if found is None else found.type

    def module_nn_type(self, name: str) -> str | None:
        """Like ``module_type``, but the ``torch.nn`` class the module is or derives from
        (``"torch.nn.Tanh"`` for a user's ``class MyTanh(nn.Tanh)``); None when there is none."""
        found = self._module_types.get(name, self.loaded_all_steps)
        return None if found is None else found.nn

    def modules_of_types(self, types: Iterable[str]) -> list[str]:
        """The names of the registered modules whose ``torch.nn`` class (``module_nn_type``) is
        one of ``types``, sorted; none for output written by smdebug."""
        wanted = set(types)
        modules = self._module_types.all()
        return sorted(name for name, found in modules.items() if found.nn in wanted)

    def nonfinite_origin(self) -> NonFiniteOrigin | None:
        """Where the training's first NaN or infinity started (step, module, whether its inputs
        were finite, when the loss followed), as the PyTorch hook's non-finite guard recorded
        it; None when it recorded none (or the output was written by smdebug)."""
        return read_nonfinite_origin(self.path)

    def has_passed_step(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> StepState:
        """Whether ``step`` is complete (AVAILABLE), skipped for good (UNAVAILABLE), or may
        still come (NOT_YET_AVAILABLE)."""
        self.maybe_refresh()
        return self._catalog.state(step, mode)

    def wait_for_steps(
        self,
        steps: Iterable[int],
        mode: ModeKeys = ModeKeys.GLOBAL,
        *,
        timeout: float | None = None,
    ) -> None:
        """Return once every step in ``steps`` is complete.

        Raises StepUnavailable for a step that was skipped, NoMoreData for one beyond the end
        of a finished job, and StepNotYetAvailable when ``timeout`` seconds pass first
        (without a timeout it waits until the job writes the step or ends).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        for step in steps:
            while True:
                state = self.has_passed_step(step, mode)
                if state == StepState.AVAILABLE:
                    break
                if state == StepState.UNAVAILABLE:
                    seen = self._catalog.steps(mode, incomplete=True)
                    last = seen[-1] if seen else -1
                    if self.loaded_all_steps and step > last:
                        raise NoMoreData(step, mode, last)
                    raise StepUnavailable(step, mode)
                if deadline is not None and time.monotonic() >= deadline:
                    raise StepNotYetAvailable(step, mode)
                time.sleep(_POLL_INTERVAL)


def create_trial(
    path: str,
    name: str | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    range_steps: tuple[int | None, int | None] | None = None,
) -> Trial:
    """The trial of the tensor output at ``path``: a local directory or an fsspec URL
    (``s3://bucket/prefix``, endpoint and credentials from the usual AWS settings); blanks
    around it are ignored.

    ``name`` defaults to the directory's name. ``timeout`` is how many seconds to wait for the
    first collections file (and for an event file an index names) before giving up.
    ``range_steps=(start, end)`` loads only global steps ``start <= step < end``.
    """
    if not isinstance(path, str | os.PathLike) or not os.fspath(path):
        raise ConfigError("path", path, "a directory holding trainprobe or smdebug tensor output")
    path = os.fspath(path).strip()  # blanks pasted around a path, as smdebug strips them
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
        raise ConfigError("timeout", timeout, "a number of seconds, 0 or more")
    return Trial(path, name, timeout=float(timeout), range_steps=range_steps)
